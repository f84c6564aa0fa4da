//! Prometheus's XOR chunk encoding (Gorilla: delta-of-delta times, XORed
//! values), as its TSDB writes it (`tsdb/chunkenc/xor.go`), for remote
//! read's streamed answers; and a reader of it, for tests and clients.
//!
//! A chunk is a big-endian u16 sample count, then a bit stream: the first
//! sample as a varint time and the value's 64 bits; the second as a uvarint
//! time delta and the XOR of its value with the first; every later one as
//! the delta of its time delta (`0`; `10` + 14 bits; `110` + 17; `1110` +
//! 20; `1111` + 64) and its value's XOR with the one before (`0` same; `10`
//! and the meaningful bits in the previous window; `11`, 5 bits of leading
//! zeros, 6 of length and the bits).

/// Samples a chunk holds at most (what Prometheus's head cuts chunks at).
pub const SAMPLES_PER_CHUNK: usize = 120;

#[derive(Debug, Default)]
struct Bits {
    bytes: Vec<u8>,
    /// Bits used in the last byte (8: full).
    used: u8,
}

impl Bits {
    fn bit(&mut self, on: bool) {
        if self.used == 8 || self.bytes.is_empty() {
            self.bytes.push(0);
            self.used = 0;
        }
        if on {
            let last = self.bytes.len() - 1;
            self.bytes[last] |= 0x80 >> self.used;
        }
        self.used += 1;
    }

    /// The low `n` bits of `v`, most significant first.
    fn bits(&mut self, v: u64, n: u32) {
        for i in (0..n).rev() {
            self.bit((v >> i) & 1 == 1);
        }
    }

    fn byte(&mut self, b: u8) {
        self.bits(u64::from(b), 8);
    }
}

/// Writes samples into one XOR chunk.
#[derive(Debug)]
pub struct XorWriter {
    b: Bits,
    n: u16,
    t: i64,
    t_delta: u64,
    v: u64,
    leading: u8,
    trailing: u8,
}

impl Default for XorWriter {
    fn default() -> Self {
        XorWriter::new()
    }
}

impl XorWriter {
    pub fn new() -> XorWriter {
        let mut b = Bits::default();
        // The sample count, filled in by `finish`.
        b.byte(0);
        b.byte(0);
        XorWriter { b, n: 0, t: 0, t_delta: 0, v: 0, leading: 0xff, trailing: 0 }
    }

    pub fn len(&self) -> usize {
        usize::from(self.n)
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Appends a sample (`t` in ms, `bits` the value's bits); times must not go back.
    pub fn append(&mut self, t: i64, bits: u64) {
        match self.n {
            0 => {
                let mut buf = [0u8; 10];
                let n = put_varint(&mut buf, t);
                for b in &buf[..n] {
                    self.b.byte(*b);
                }
                self.b.bits(bits, 64);
            }
            1 => {
                let delta = t.wrapping_sub(self.t) as u64;
                let mut buf = [0u8; 10];
                let n = put_uvarint(&mut buf, delta);
                for b in &buf[..n] {
                    self.b.byte(*b);
                }
                self.value(bits);
                self.t_delta = delta;
            }
            _ => {
                let delta = t.wrapping_sub(self.t) as u64;
                let dod = delta.wrapping_sub(self.t_delta) as i64;
                if dod == 0 {
                    self.b.bit(false);
                } else if fits(dod, 14) {
                    self.b.bits(0b10, 2);
                    self.b.bits(dod as u64, 14);
                } else if fits(dod, 17) {
                    self.b.bits(0b110, 3);
                    self.b.bits(dod as u64, 17);
                } else if fits(dod, 20) {
                    self.b.bits(0b1110, 4);
                    self.b.bits(dod as u64, 20);
                } else {
                    self.b.bits(0b1111, 4);
                    self.b.bits(dod as u64, 64);
                }
                self.value(bits);
                self.t_delta = delta;
            }
        }
        self.t = t;
        self.v = bits;
        self.n += 1;
    }

    fn value(&mut self, bits: u64) {
        let delta = bits ^ self.v;
        if delta == 0 {
            self.b.bit(false);
            return;
        }
        self.b.bit(true);
        let leading = (delta.leading_zeros() as u8).min(31);
        let trailing = delta.trailing_zeros() as u8;
        if self.leading != 0xff && leading >= self.leading && trailing >= self.trailing {
            self.b.bit(false);
            self.b.bits(delta >> self.trailing, 64 - u32::from(self.leading) - u32::from(self.trailing));
            return;
        }
        self.leading = leading;
        self.trailing = trailing;
        self.b.bit(true);
        self.b.bits(u64::from(leading), 5);
        let significant = 64 - u32::from(leading) - u32::from(trailing);
        // 64 significant bits are written as 0 (6 bits hold 0..63).
        self.b.bits(u64::from(significant), 6);
        self.b.bits(delta >> trailing, significant);
    }

    /// The chunk's bytes.
    pub fn finish(mut self) -> Vec<u8> {
        self.b.bytes[..2].copy_from_slice(&self.n.to_be_bytes());
        self.b.bytes
    }
}

/// Whether `x` is within what `n` bits hold as Prometheus counts it.
fn fits(x: i64, n: u32) -> bool {
    -((1i64 << (n - 1)) - 1) <= x && x <= 1i64 << (n - 1)
}

fn put_uvarint(buf: &mut [u8; 10], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        buf[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    buf[i] = v as u8;
    i + 1
}

fn put_varint(buf: &mut [u8; 10], v: i64) -> usize {
    put_uvarint(buf, ((v << 1) ^ (v >> 63)) as u64)
}

/// Reads the bits of a chunk.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bit(&mut self) -> Option<bool> {
        let b = *self.bytes.get(self.at / 8)?;
        let on = b & (0x80 >> (self.at % 8)) != 0;
        self.at += 1;
        Some(on)
    }

    fn bits(&mut self, n: u32) -> Option<u64> {
        let mut v = 0u64;
        for _ in 0..n {
            v = (v << 1) | u64::from(self.bit()?);
        }
        Some(v)
    }

    fn uvarint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.bits(8)?;
            v |= (b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
}

/// The samples of an XOR chunk (time in ms, value's bits); `None` when the
/// bytes are not one.
pub fn read_chunk(bytes: &[u8]) -> Option<Vec<(i64, u64)>> {
    let n = u16::from_be_bytes(bytes.get(..2)?.try_into().ok()?);
    let mut r = Reader { bytes, at: 16 };
    let mut out = Vec::with_capacity(usize::from(n));
    let (mut t, mut delta, mut v, mut leading, mut trailing) = (0i64, 0u64, 0u64, 0u32, 0u32);
    for i in 0..n {
        if i == 0 {
            let z = r.uvarint()?;
            t = ((z >> 1) as i64) ^ -((z & 1) as i64);
            v = r.bits(64)?;
        } else {
            if i == 1 {
                delta = r.uvarint()?;
            } else {
                let mut ones = 0;
                while ones < 4 && r.bit()? {
                    ones += 1;
                }
                let size = [0, 14, 17, 20, 64][ones];
                let mut dod = r.bits(size)? as i64;
                if size > 0 && size < 64 && dod > 1 << (size - 1) {
                    dod -= 1 << size;
                }
                delta = delta.wrapping_add(dod as u64);
            }
            t = t.wrapping_add(delta as i64);
            if r.bit()? {
                if r.bit()? {
                    leading = r.bits(5)? as u32;
                    let mut significant = r.bits(6)? as u32;
                    if significant == 0 {
                        significant = 64;
                    }
                    trailing = 64 - leading - significant;
                }
                let significant = 64 - leading - trailing;
                v ^= r.bits(significant)? << trailing;
            }
        }
        out.push((t, v));
    }
    Some(out)
}

/// CRC-32C (Castagnoli), which frames of a streamed answer carry.
pub fn crc32c(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 == 1 { (c >> 1) ^ 0x82f6_3b78 } else { c >> 1 };
            }
            *e = c;
        }
        t
    });
    !data.iter().fold(!0u32, |c, b| table[((c ^ u32::from(*b)) & 0xff) as usize] ^ (c >> 8))
}

/// A frame of a streamed answer: the message's length (uvarint), its CRC-32C
/// (big-endian) and the message.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut buf = [0u8; 10];
    let n = put_uvarint(&mut buf, message.len() as u64);
    let mut out = Vec::with_capacity(n + 4 + message.len());
    out.extend_from_slice(&buf[..n]);
    out.extend_from_slice(&crc32c(message).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// Splits a streamed answer into its messages, checking each one's CRC.
pub fn unframe(mut body: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    while !body.is_empty() {
        let mut r = Reader { bytes: body, at: 0 };
        let len = r.uvarint().ok_or("a frame's length is cut short")? as usize;
        let at = r.at / 8;
        let crc = body.get(at..at + 4).ok_or("a frame's checksum is cut short")?;
        let message = body.get(at + 4..at + 4 + len).ok_or("a frame is cut short")?;
        if crc32c(message).to_be_bytes() != crc {
            return Err("a frame's CRC-32C does not match".into());
        }
        out.push(message);
        body = &body[at + 4 + len..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(samples: &[(i64, u64)]) {
        let mut w = XorWriter::new();
        for (t, v) in samples {
            w.append(*t, *v);
        }
        let bytes = w.finish();
        assert_eq!(read_chunk(&bytes).unwrap(), samples);
    }

    #[test]
    fn chunks_read_back_as_written() {
        round_trip(&[]);
        round_trip(&[(1_700_000_000_000, 1.0f64.to_bits())]);
        let scrape: Vec<(i64, u64)> =
            (0..120).map(|i| (1_700_000_000_000 + i * 15_000 + (i % 3) * 7, ((i * i) as f64 * 0.25).to_bits())).collect();
        round_trip(&scrape);
        // Every delta-of-delta width, negative ones, NaNs and the staleness marker.
        let odd = [
            (-5, 0),
            (0, f64::NAN.to_bits()),
            (8191, 0x7ff0_0000_0000_0002),
            (8192 + 8191, 1),
            (200_000, u64::MAX),
            (1_000_000, 0),
            (900_000, 1 << 63),
            (i64::MAX / 4, 7),
        ];
        round_trip(&odd);
    }

    #[test]
    fn the_xor_of_a_known_chunk_is_prometheus_bytes() {
        // Two samples: the varint of 1000 ms and the bits of 1.0, then a
        // delta of 1000 and the same value (one 0 bit).
        let mut w = XorWriter::new();
        w.append(1000, 1.0f64.to_bits());
        w.append(2000, 1.0f64.to_bits());
        let bytes = w.finish();
        let mut want = vec![0, 2, 0xd0, 0x0f];
        want.extend_from_slice(&1.0f64.to_bits().to_be_bytes());
        want.extend_from_slice(&[0xe8, 0x07, 0x00]);
        assert_eq!(bytes, want);
    }

    #[test]
    fn crc32c_and_frames() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283, "the CRC-32C check value");
        let mut body = frame(b"hello");
        body.extend(frame(&[7u8; 300]));
        assert_eq!(unframe(&body).unwrap(), vec![&b"hello"[..], &[7u8; 300][..]]);
        body[6] ^= 1;
        assert!(unframe(&body).is_err());
    }
}
