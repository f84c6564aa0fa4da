//! PostgreSQL's partition hash, reproduced bit for bit.
//!
//! chute routes every row to its leaf partition on the client, so a row bound
//! for a HASH-partitioned table must land exactly where the server itself
//! would put it; a single differing bit sends a row to a leaf whose partition
//! constraint rejects it. This module therefore re-implements, for the key
//! types chute supports, the hash functions PostgreSQL 15 uses for hash
//! partitioning: each column's seeded "extended" hash (hash opclass support
//! function 2), combined across the key's columns as
//! `compute_partition_hash_value` in `src/backend/partitioning/partbounds.c`
//! does, and reduced modulo the partition modulus.
//!
//! Values come in as their binary wire form (what binary COPY carries), since
//! that is what chute's encoder produces anyway. The caller must pass the
//! value the server will *store*: a column typmod that rounds (`numeric(p,s)`,
//! `timestamp(3)`) is applied before hashing, not here.
//!
//! Two assumptions are documented where they matter:
//! - the server is little-endian (x86_64, aarch64): `float8` and `numeric`
//!   hash their in-memory representation, so a big-endian server would hash
//!   differently;
//! - text-like keys use a deterministic collation (the default, `C`, or any
//!   libc/ICU collation not created with `deterministic = false`). A
//!   nondeterministic collation hashes a locale sort key, which only the
//!   server can compute; callers must route those through the parent.

use crate::numeric::{Numeric, NumericClass};

/// The seed `compute_partition_hash_value` passes to every column's hash
/// function (`HASH_PARTITION_SEED` in `src/include/catalog/partition.h`).
pub const HASH_PARTITION_SEED: u64 = 0x7A5B_2236_7996_DCFD;

/// The initial value of lookup3's state, before the length is added.
const LOOKUP3_INIT: u32 = 0x9e37_79b9u32.wrapping_add(3_923_095);

/// Bob Jenkins' lookup3 state (a, b, c), as used by `hash_bytes_extended`.
#[derive(Clone, Copy)]
struct Lookup3 {
    a: u32,
    b: u32,
    c: u32,
}

impl Lookup3 {
    /// The state for a key of `len` bytes, perturbed by a non-zero seed the
    /// way PostgreSQL does: the seed is treated as one extra 12-byte block.
    fn new(len: u32, seed: u64) -> Lookup3 {
        let init = LOOKUP3_INIT.wrapping_add(len);
        let mut s = Lookup3 { a: init, b: init, c: init };
        if seed != 0 {
            s.a = s.a.wrapping_add((seed >> 32) as u32);
            s.b = s.b.wrapping_add(seed as u32);
            s.mix();
        }
        s
    }

    fn add(&mut self, a: u32, b: u32, c: u32) {
        self.a = self.a.wrapping_add(a);
        self.b = self.b.wrapping_add(b);
        self.c = self.c.wrapping_add(c);
    }

    /// lookup3's reversible `mix()`.
    fn mix(&mut self) {
        let Lookup3 { mut a, mut b, mut c } = *self;
        a = a.wrapping_sub(c) ^ c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a) ^ a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b) ^ b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c) ^ c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a) ^ a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b) ^ b.rotate_left(4);
        b = b.wrapping_add(a);
        *self = Lookup3 { a, b, c };
    }

    /// lookup3's `final()`, then the 64-bit result PostgreSQL reports: b in
    /// the high half, c in the low half.
    fn finish(self) -> u64 {
        let Lookup3 { mut a, mut b, mut c } = self;
        c = (c ^ b).wrapping_sub(b.rotate_left(14));
        a = (a ^ c).wrapping_sub(c.rotate_left(11));
        b = (b ^ a).wrapping_sub(a.rotate_left(25));
        c = (c ^ b).wrapping_sub(b.rotate_left(16));
        a = (a ^ c).wrapping_sub(c.rotate_left(4));
        b = (b ^ a).wrapping_sub(a.rotate_left(14));
        c = (c ^ b).wrapping_sub(b.rotate_left(24));
        (u64::from(b) << 32) | u64::from(c)
    }
}

fn le_word(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// PostgreSQL's `hash_bytes_extended` (`src/common/hashfn.c`): lookup3 over
/// `k` with an optional 64-bit seed (0 means unseeded).
///
/// Words are read little-endian, which is what the server does on a
/// little-endian machine; a big-endian server reads them the other way round.
pub fn hash_bytes_extended(k: &[u8], seed: u64) -> u64 {
    // keylen is a C int; varlena values are far below 2^31 bytes.
    let mut s = Lookup3::new(k.len() as u32, seed);
    let mut blocks = k.chunks_exact(12);
    for block in &mut blocks {
        s.add(le_word(&block[0..4]), le_word(&block[4..8]), le_word(&block[8..12]));
        s.mix();
    }
    // The last 0..=11 bytes fill a, then b, then c from its second byte up:
    // c's lowest byte is reserved (lookup3 once kept the length there).
    let tail = blocks.remainder();
    let mut padded = [0u8; 12];
    let (head, rest) = tail.split_at(tail.len().min(8));
    padded[..head.len()].copy_from_slice(head);
    padded[9..9 + rest.len()].copy_from_slice(rest);
    s.add(le_word(&padded[0..4]), le_word(&padded[4..8]), le_word(&padded[8..12]));
    s.finish()
}

/// PostgreSQL's `hash_bytes_uint32_extended`: the 64-bit seeded hash of one
/// 32-bit value (equal to `hash_bytes_extended` of its 4 little-endian bytes).
pub fn hash_uint32_extended(k: u32, seed: u64) -> u64 {
    let mut s = Lookup3::new(4, seed);
    s.add(k, 0, 0);
    s.finish()
}

/// PostgreSQL's `hash_combine64` (`src/include/common/hashfn.h`): folds hash
/// `b` into the running hash `a`.
pub fn hash_combine64(a: u64, b: u64) -> u64 {
    a ^ b.wrapping_add(0x49a0_f4dd_15e5_a8e3).wrapping_add(a << 54).wrapping_add(a >> 7)
}

/// Which extended hash function (hash opclass support function 2) a key column uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashKind {
    /// `bool` (`hashcharextended`).
    Bool,
    /// `int2` (`hashint2extended`).
    Int2,
    /// `int4` (`hashint4extended`).
    Int4,
    /// `int8` (`hashint8extended`).
    Int8,
    /// `float4` (`hashfloat4extended`: widened to float8).
    Float4,
    /// `float8` (`hashfloat8extended`).
    Float8,
    /// `numeric` (`hash_numeric_extended`).
    Numeric,
    /// `text`, `varchar`, `name` with a deterministic collation (`hashtextextended`, `hashnameextended`).
    Text,
    /// `char(n)` / `bpchar` (`hashbpcharextended`: trailing spaces ignored).
    Bpchar,
    /// `bytea` (`hashvarlenaextended`).
    Bytea,
    /// `date` (`hashint4extended` on days since 2000-01-01).
    Date,
    /// `timestamp` (`timestamp_hash_extended`, i.e. `hashint8extended`).
    Timestamp,
    /// `timestamptz` (`timestamp_hash_extended`, i.e. `hashint8extended`).
    Timestamptz,
    /// `uuid` (`uuid_hash_extended`).
    Uuid,
    /// `oid` (`hashoidextended`).
    Oid,
}

impl HashKind {
    /// From a type OID (16 bool, 21 int2, 23 int4, 20 int8, 700 float4, 701 float8, 1700 numeric,
    /// 25 text, 1043 varchar, 19 name, 1042 bpchar, 17 bytea, 1082 date, 1114 timestamp,
    /// 1184 timestamptz, 2950 uuid, 26 oid). `varchar` uses `text_ops`, and `name`'s
    /// `hashnameextended` hashes the same bytes as `hashtextextended`, so both map to [`HashKind::Text`].
    /// The key column must use the type's default hash opclass.
    pub fn from_type_oid(oid: u32) -> Option<HashKind> {
        Some(match oid {
            16 => HashKind::Bool,
            21 => HashKind::Int2,
            23 => HashKind::Int4,
            20 => HashKind::Int8,
            700 => HashKind::Float4,
            701 => HashKind::Float8,
            1700 => HashKind::Numeric,
            25 | 1043 | 19 => HashKind::Text,
            1042 => HashKind::Bpchar,
            17 => HashKind::Bytea,
            1082 => HashKind::Date,
            1114 => HashKind::Timestamp,
            1184 => HashKind::Timestamptz,
            2950 => HashKind::Uuid,
            26 => HashKind::Oid,
            _ => return None,
        })
    }

    /// The length of the binary form of a fixed-width kind.
    fn fixed_len(self) -> Option<usize> {
        match self {
            HashKind::Bool => Some(1),
            HashKind::Int2 => Some(2),
            HashKind::Int4 | HashKind::Float4 | HashKind::Date | HashKind::Oid => Some(4),
            HashKind::Int8 | HashKind::Float8 | HashKind::Timestamp | HashKind::Timestamptz => Some(8),
            HashKind::Uuid => Some(16),
            HashKind::Numeric | HashKind::Text | HashKind::Bpchar | HashKind::Bytea => None,
        }
    }
}

/// Why a value could not be hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// A fixed-width value whose binary form has the wrong number of bytes.
    #[error("a binary {kind:?} value is {expected} bytes long, got {actual}")]
    WrongLength { kind: HashKind, expected: usize, actual: usize },
    /// A numeric wire value the server's `numeric_recv` would reject.
    #[error("malformed binary numeric: {0}")]
    MalformedNumeric(&'static str),
    /// A hash partition modulus of zero (PostgreSQL requires a positive one).
    #[error("a hash partition modulus must be positive")]
    ZeroModulus,
}

/// Extended hash of ONE value given as its PostgreSQL *binary wire form* — exactly the bytes
/// binary COPY / the binary send function carry for that value (big-endian ints, IEEE floats,
/// numeric's NBASE-10000 wire struct, raw UTF-8 for text, 16 bytes for uuid, int32 days since 2000-01-01 for date,
/// int64 microseconds since 2000-01-01 for `timestamp[tz]`).
///
/// Equals the server's `hash*extended(value, seed)` for the value the server
/// would store after receiving these bytes.
pub fn hash_wire_value(kind: HashKind, wire: &[u8], seed: u64) -> Result<u64, HashError> {
    if let Some(expected) = kind.fixed_len()
        && wire.len() != expected
    {
        return Err(HashError::WrongLength { kind, expected, actual: wire.len() });
    }
    Ok(match kind {
        // boolrecv takes any non-zero byte as true; bool hashes as the char 0 or 1.
        HashKind::Bool => hash_uint32_extended(u32::from(wire[0] != 0), seed),
        HashKind::Int2 => hash_uint32_extended(i32::from(i16::from_be_bytes([wire[0], wire[1]])) as u32, seed),
        HashKind::Int4 | HashKind::Date | HashKind::Oid => hash_uint32_extended(u32::from_be_bytes(be4(wire)), seed),
        HashKind::Int8 | HashKind::Timestamp | HashKind::Timestamptz => hash_int8(i64::from_be_bytes(be8(wire)), seed),
        HashKind::Float4 => hash_float8(f64::from(f32::from_be_bytes(be4(wire))), seed),
        HashKind::Float8 => hash_float8(f64::from_be_bytes(be8(wire)), seed),
        HashKind::Numeric => hash_numeric(wire, seed)?,
        HashKind::Text | HashKind::Bytea | HashKind::Uuid => hash_bytes_extended(wire, seed),
        HashKind::Bpchar => hash_bytes_extended(trim_trailing_spaces(wire), seed),
    })
}

fn be4(wire: &[u8]) -> [u8; 4] {
    [wire[0], wire[1], wire[2], wire[3]]
}

fn be8(wire: &[u8]) -> [u8; 8] {
    [wire[0], wire[1], wire[2], wire[3], wire[4], wire[5], wire[6], wire[7]]
}

/// `hashint8extended`: the high half is folded into the low half so that an
/// int8 hashes like the int2/int4 of the same value (cross-type hash joins).
fn hash_int8(v: i64, seed: u64) -> u64 {
    let lo = v as u32;
    let hi = (v >> 32) as u32;
    hash_uint32_extended(lo ^ if v >= 0 { hi } else { !hi }, seed)
}

/// `hashfloat8extended`: zero and minus zero compare equal, so both return
/// the seed; every NaN hashes as the canonical quiet NaN. Otherwise the
/// 8 bytes are hashed in the server's native (here: little-endian) order.
fn hash_float8(v: f64, seed: u64) -> u64 {
    if v == 0.0 {
        return seed;
    }
    let v = if v.is_nan() { f64::from_bits(0x7FF8_0000_0000_0000) } else { v };
    hash_bytes_extended(&v.to_le_bytes(), seed)
}

/// `bcTruelen`: bpchar compares (and so hashes) without its trailing spaces.
fn trim_trailing_spaces(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &s[..end]
}

/// `hash_numeric_extended` of the value `numeric_recv` builds from `wire`
/// (parsed, validated and scale-truncated by the router's [`Numeric`] view).
///
/// Only the significant NBASE digits are hashed (leading and trailing zero
/// digits stripped, the weight adjusted), so values that compare equal hash
/// equal whatever their scale; the weight is then XORed in. NaN and the
/// infinities hash to the seed, zero to `seed - 1`. Digits are hashed as
/// native (little-endian) int16, as the server stores them.
fn hash_numeric(wire: &[u8], seed: u64) -> Result<u64, HashError> {
    let n = Numeric::parse(wire).ok_or(HashError::MalformedNumeric("not a value numeric_recv accepts"))?;
    if n.class() != NumericClass::Finite {
        return Ok(seed);
    }
    // Leading zero digits are gone already; trailing ones are not hashed.
    let significant = (0..n.len()).rev().find(|&i| n.digit(i) != 0).map_or(0, |last| last + 1);
    if significant == 0 {
        return Ok(seed.wrapping_sub(1));
    }
    let bytes: Vec<u8> = (0..significant).flat_map(|i| (n.digit(i) as i16).to_le_bytes()).collect();
    // C converts the int weight to uint64 for the XOR: sign extension.
    Ok(hash_bytes_extended(&bytes, seed) ^ i64::from(n.weight()) as u64)
}

/// compute_partition_hash_value: starts from 0, for each non-NULL column folds in
/// hash_wire_value(kind, wire, HASH_PARTITION_SEED) with hash_combine64. `None` = NULL.
pub fn partition_hash(keys: &[(HashKind, Option<&[u8]>)]) -> Result<u64, HashError> {
    let mut row_hash = 0;
    for &(kind, value) in keys {
        if let Some(wire) = value {
            row_hash = hash_combine64(row_hash, hash_wire_value(kind, wire, HASH_PARTITION_SEED)?);
        }
    }
    Ok(row_hash)
}

/// The remainder PostgreSQL routes on: partition_hash % modulus.
///
/// The server reduces modulo the greatest modulus among the partitions; since
/// every modulus divides the greatest, this is the remainder for any of them.
pub fn hash_remainder(keys: &[(HashKind, Option<&[u8]>)], modulus: u64) -> Result<u64, HashError> {
    if modulus == 0 {
        return Err(HashError::ZeroModulus);
    }
    Ok(partition_hash(keys)? % modulus)
}

#[cfg(test)]
mod tests {
    //! Known answers from a PostgreSQL 15.18 server (x86_64). Each vector
    //! names the SQL that produced it; the server printed it with `to_hex`.

    use super::*;
    use crate::encode::{NUMERIC_NAN, NUMERIC_NEG, NUMERIC_NINF, NUMERIC_PINF, NUMERIC_POS};
    use proptest::prelude::*;

    const SEED7: u64 = 7;

    fn hash(kind: HashKind, wire: &[u8], seed: u64) -> u64 {
        hash_wire_value(kind, wire, seed).unwrap()
    }

    /// A numeric's binary wire form, as `numeric_send` writes it.
    fn numeric_wire(weight: i16, sign: u16, dscale: u16, digits: &[i16]) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend((digits.len() as u16).to_be_bytes());
        w.extend(weight.to_be_bytes());
        w.extend(sign.to_be_bytes());
        w.extend(dscale.to_be_bytes());
        for d in digits {
            w.extend(d.to_be_bytes());
        }
        w
    }

    #[test]
    fn int4_int2_and_oid_match_the_server() {
        // SELECT hashint4extended(42, 0)
        assert_eq!(hash(HashKind::Int4, &42i32.to_be_bytes(), 0), 0x6f2a_09a5_59fc_fec8);
        // SELECT hashint4extended(0, 0)
        assert_eq!(hash(HashKind::Int4, &0i32.to_be_bytes(), 0), 0x39a8_25be_efbe_c0af);
        // SELECT hashint4extended(42, 8816678312871386365)  -- HASH_PARTITION_SEED
        assert_eq!(hash(HashKind::Int4, &42i32.to_be_bytes(), HASH_PARTITION_SEED), 0x6632_18bc_fb84_b17f);
        // SELECT hashint4extended(-1, 7)
        assert_eq!(hash(HashKind::Int4, &(-1i32).to_be_bytes(), SEED7), 0x7230_b9a4_b2e8_7cbc);
        // SELECT hashint4extended(-2147483648, 7)
        assert_eq!(hash(HashKind::Int4, &i32::MIN.to_be_bytes(), SEED7), 0x4ec0_5c0f_e562_1b79);
        // SELECT hashint2extended(-5::int2, 7)
        assert_eq!(hash(HashKind::Int2, &(-5i16).to_be_bytes(), SEED7), 0xeffd_1b8e_63a3_0a40);
        // SELECT hashoidextended(4000000000::oid, 7)
        assert_eq!(hash(HashKind::Oid, &4_000_000_000u32.to_be_bytes(), SEED7), 0x0b38_7a0d_303c_c477);
    }

    #[test]
    fn bool_hashes_as_the_char_zero_or_one() {
        // SELECT hashcharextended(E'\001'::"char", 7)  -- bool_ops uses hashcharextended
        assert_eq!(hash(HashKind::Bool, &[1], SEED7), 0xa4e8_60cc_d0f3_7fbf);
        // boolrecv reads any non-zero byte as true.
        assert_eq!(hash(HashKind::Bool, &[0x7f], SEED7), 0xa4e8_60cc_d0f3_7fbf);
        // SELECT hashint4extended(0, 7)  -- = hashcharextended of false
        assert_eq!(hash(HashKind::Bool, &[0], SEED7), 0xfd58_c6d8_ed2c_673c);
    }

    #[test]
    fn int8_folds_its_high_half_like_the_server() {
        // SELECT hashint8extended(42, 0)  -- same as hashint4extended(42, 0)
        assert_eq!(hash(HashKind::Int8, &42i64.to_be_bytes(), 0), 0x6f2a_09a5_59fc_fec8);
        // SELECT hashint8extended(-1, 7)
        assert_eq!(hash(HashKind::Int8, &(-1i64).to_be_bytes(), SEED7), 0x7230_b9a4_b2e8_7cbc);
        // SELECT hashint8extended(5000000000, 7)
        assert_eq!(hash(HashKind::Int8, &5_000_000_000i64.to_be_bytes(), SEED7), 0x9a08_d068_4308_5499);
        // SELECT hashint8extended(-5000000000, 7)
        assert_eq!(hash(HashKind::Int8, &(-5_000_000_000i64).to_be_bytes(), SEED7), 0xbe91_b75c_5d11_7929);
        // SELECT hashint8extended(9223372036854775807, 7)
        assert_eq!(hash(HashKind::Int8, &i64::MAX.to_be_bytes(), SEED7), 0x4ec0_5c0f_e562_1b79);
        // SELECT hashint8extended(-9223372036854775808, 7)
        assert_eq!(hash(HashKind::Int8, &i64::MIN.to_be_bytes(), SEED7), 0xe678_64eb_5e2b_78d6);
    }

    #[test]
    fn dates_and_timestamps_hash_their_integer_form() {
        // SELECT '2024-02-29'::date - '2000-01-01'::date  -- 8825
        // SELECT hashint4extended(8825, 7)  -- date_ops uses hashint4extended
        assert_eq!(hash(HashKind::Date, &8825i32.to_be_bytes(), SEED7), 0xeac4_a4e3_48f7_1aa9);
        // SELECT date_send('0001-01-01')  -- \xfff4dbf9 (-730119)
        // SELECT hashint4extended(-730119, 7)
        assert_eq!(hash(HashKind::Date, &[0xff, 0xf4, 0xdb, 0xf9], SEED7), 0x58fa_e332_b222_6e53);
        // SELECT timestamp_hash_extended('2024-02-29 12:34:56.789012'::timestamp, 7)  -- 762525296789012 us
        let micros = 762_525_296_789_012i64.to_be_bytes();
        assert_eq!(hash(HashKind::Timestamp, &micros, SEED7), 0x9532_0fad_901f_683a);
        // SET timezone = 'UTC';
        // SELECT timestamp_hash_extended('2024-02-29 12:34:56.789012+00'::timestamptz::timestamp, 7)
        assert_eq!(hash(HashKind::Timestamptz, &micros, SEED7), 0x9532_0fad_901f_683a);
        // SELECT timestamp_hash_extended('1970-01-01'::timestamp, 7)  -- -946684800000000 us
        assert_eq!(hash(HashKind::Timestamp, &(-946_684_800_000_000i64).to_be_bytes(), SEED7), 0xa8b0_7841_1c96_f7f2);
    }

    #[test]
    fn floats_match_the_server_including_zero_and_nan() {
        // SELECT hashfloat8extended(1.5, 7)
        assert_eq!(hash(HashKind::Float8, &1.5f64.to_be_bytes(), SEED7), 0x4674_b8b3_86da_acf7);
        // SELECT hashfloat8extended(-2.25, 0)
        assert_eq!(hash(HashKind::Float8, &(-2.25f64).to_be_bytes(), 0), 0x3ced_1f85_496f_63a1);
        // SELECT hashfloat8extended(0, 7), hashfloat8extended('-0'::float8, 7)  -- both 7: the seed
        assert_eq!(hash(HashKind::Float8, &0.0f64.to_be_bytes(), SEED7), SEED7);
        assert_eq!(hash(HashKind::Float8, &(-0.0f64).to_be_bytes(), SEED7), SEED7);
        // SELECT hashfloat8extended('Infinity', 7)
        assert_eq!(hash(HashKind::Float8, &f64::INFINITY.to_be_bytes(), SEED7), 0xd33a_4104_6eec_b740);
        // SELECT hashfloat8extended('NaN', 7)  -- any NaN bit pattern hashes the same
        for nan in [0x7ff8_0000_0000_0000u64, 0xfff8_0000_0000_0000, 0x7ff0_0000_0000_0001] {
            assert_eq!(hash(HashKind::Float8, &nan.to_be_bytes(), SEED7), 0x4043_d098_c9e9_9fc0, "{nan:x}");
        }
        // SELECT hashfloat4extended(1.5::float4, 7)  -- = the float8 hash: widened
        assert_eq!(hash(HashKind::Float4, &1.5f32.to_be_bytes(), SEED7), 0x4674_b8b3_86da_acf7);
        // SELECT hashfloat4extended(0.1::float4, 7)
        assert_eq!(hash(HashKind::Float4, &0.1f32.to_be_bytes(), SEED7), 0x2edb_bdbd_feba_bdb7);
        // SELECT hashfloat4extended('NaN'::float4, 7)
        assert_eq!(hash(HashKind::Float4, &f32::NAN.to_be_bytes(), SEED7), 0x4043_d098_c9e9_9fc0);
        assert_eq!(hash(HashKind::Float4, &(-0.0f32).to_be_bytes(), SEED7), SEED7);
    }

    #[test]
    fn text_hashes_its_bytes_for_every_tail_length() {
        // SELECT hashtextextended('abc', 7)  -- also hashnameextended('abc'::name, 7), 'abc'::varchar
        assert_eq!(hash(HashKind::Text, b"abc", SEED7), 0x1b4c_5cab_d18d_eb19);
        // SELECT hashtextextended('abc', 0)
        assert_eq!(hash(HashKind::Text, b"abc", 0), 0xa25b_273d_d12f_eb97);
        // SELECT hashtextextended('abc', 8816678312871386365)
        assert_eq!(hash(HashKind::Text, b"abc", HASH_PARTITION_SEED), 0x325c_02d1_6f43_e1c2);
        // SELECT hashtextextended('', 7)
        assert_eq!(hash(HashKind::Text, b"", SEED7), 0x263d_8460_48cd_dfa0);
        // SELECT hashtextextended('abcdefghijkl', 7)  -- exactly one 12-byte block
        assert_eq!(hash(HashKind::Text, b"abcdefghijkl", SEED7), 0x828c_2089_c7a6_5f52);
        // SELECT hashtextextended('the quick brown fox jum', 7)  -- a block and an 11-byte tail
        assert_eq!(hash(HashKind::Text, b"the quick brown fox jum", SEED7), 0xb5c2_f99b_3e1d_b4de);
        // SELECT hashtextextended('Grüße, 世界 🚀', 7)
        assert_eq!(hash(HashKind::Text, "Grüße, 世界 🚀".as_bytes(), SEED7), 0xe30f_0035_65e5_d339);
        // bytea has no SQL-callable extended hash; hashvarlenaextended hashes the same bytes.
        assert_eq!(hash(HashKind::Bytea, b"abc", SEED7), 0x1b4c_5cab_d18d_eb19);
    }

    #[test]
    fn bpchar_ignores_trailing_spaces() {
        // SELECT hashbpcharextended('ab  '::char(4), 7), hashbpcharextended('ab'::bpchar, 7)
        for padded in [&b"ab"[..], b"ab  ", b"ab          "] {
            assert_eq!(hash(HashKind::Bpchar, padded, SEED7), 0x83b5_6278_c87d_d376);
        }
        // Only trailing spaces go: leading ones and other blanks stay.
        assert_ne!(hash(HashKind::Bpchar, b" ab", SEED7), 0x83b5_6278_c87d_d376);
        assert_ne!(hash(HashKind::Bpchar, b"ab\t", SEED7), 0x83b5_6278_c87d_d376);
        // An all-space value hashes like the empty string: SELECT hashtextextended('', 7)
        assert_eq!(hash(HashKind::Bpchar, b"   ", SEED7), 0x263d_8460_48cd_dfa0);
    }

    #[test]
    fn uuid_hashes_its_sixteen_bytes() {
        // SELECT uuid_hash_extended('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 7)
        let u = [0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11];
        assert_eq!(hash(HashKind::Uuid, &u, SEED7), 0x934f_56ad_a629_815f);
    }

    #[test]
    fn numerics_match_the_server() {
        let pos = NUMERIC_POS;
        // SELECT hash_numeric_extended(0, 7)  -- zero hashes to seed - 1; numeric_send(0) = \x0000000000000000
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, pos, 0, &[]), SEED7), 6);
        // SELECT hash_numeric_extended(0, 0)
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, pos, 0, &[]), 0), u64::MAX);
        // SELECT hash_numeric_extended(1, 7) and (-1, 7): the sign is not hashed
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, pos, 0, &[1]), SEED7), 0x6fb9_27ba_36b3_67ae);
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, NUMERIC_NEG, 0, &[1]), SEED7), 0x6fb9_27ba_36b3_67ae);
        // SELECT hash_numeric_extended(10000, 7)  -- digits {1}, weight 1
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(1, pos, 0, &[1]), SEED7), 0x6fb9_27ba_36b3_67af);
        // SELECT hash_numeric_extended(1e20, 7)  -- numeric_send(1e20) = \x00010005000000000001
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(5, pos, 0, &[1]), SEED7), 0x6fb9_27ba_36b3_67ab);
        // SELECT hash_numeric_extended(1e20, 8816678312871386365)
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(5, pos, 0, &[1]), HASH_PARTITION_SEED), 0xd327_35c3_aa01_325b);
        // SELECT hash_numeric_extended(0.0001, 7)  -- numeric_send = \x0001ffff000000040001; negative weight
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(-1, pos, 4, &[1]), SEED7), 0x9046_d845_c94c_9851);
        // SELECT hash_numeric_extended(123456789.000100, 7)  -- \x0004000200000006000109291a850001
        let wire = numeric_wire(2, pos, 6, &[1, 2345, 6789, 1]);
        assert_eq!(hash(HashKind::Numeric, &wire, SEED7), 0xd521_e9f8_baf3_d899);
        // SELECT hash_numeric_extended(-123.45, 7)  -- \x0002000040000002007b1194
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, NUMERIC_NEG, 2, &[123, 4500]), SEED7), 0x0cb1_cc20_3945_7675);
        // SELECT hash_numeric_extended(-0.000012, 7)  -- \x0001fffe4000000604b0
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(-2, NUMERIC_NEG, 6, &[1200]), SEED7), 0xc20b_8d59_bc86_1ce3);
        // SELECT hash_numeric_extended(1.5, 7), hash_numeric_extended(1.50, 7)  -- scale is not hashed
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, pos, 1, &[1, 5000]), SEED7), 0x481a_d7f3_12c6_a1c5);
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, pos, 2, &[1, 5000]), SEED7), 0x481a_d7f3_12c6_a1c5);
        // SELECT hash_numeric_extended('NaN', 7), ('Infinity', 7), ('-Infinity', 7)  -- all the seed
        for special in [NUMERIC_NAN, NUMERIC_PINF, NUMERIC_NINF] {
            assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, special, 0, &[]), SEED7), SEED7);
        }
        // numeric_send('Infinity') = \x00000000d0000020 (dscale bits set): still the seed
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, NUMERIC_PINF, 0x20, &[]), SEED7), SEED7);
    }

    #[test]
    fn non_canonical_numerics_hash_like_what_the_server_stores() {
        let one_point_five = 0x481a_d7f3_12c6_a1c5; // SELECT hash_numeric_extended(1.5, 7)
        // Leading and trailing zero digits, which make_result strips.
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(1, NUMERIC_POS, 8, &[0, 1, 5000, 0]), SEED7), one_point_five);
        // Digits hidden by dscale are truncated by numeric_recv: 1.23456 sent with dscale 2 is 1.23.
        // SELECT hash_numeric_extended(1.23, 7)
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, NUMERIC_POS, 2, &[1, 2345, 6000]), SEED7), 0x1ed0_a6f0_343e_5072);
        // 0.00001 sent with dscale 4 is zero.
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(-2, NUMERIC_POS, 4, &[1000]), SEED7), 6);
        // Negative zero is zero.
        assert_eq!(hash(HashKind::Numeric, &numeric_wire(0, NUMERIC_NEG, 0, &[0]), SEED7), 6);
    }

    #[test]
    fn malformed_values_are_rejected() {
        let err = hash_wire_value(HashKind::Int4, &[0, 0, 1], 0).unwrap_err();
        assert_eq!(err, HashError::WrongLength { kind: HashKind::Int4, expected: 4, actual: 3 });
        assert!(hash_wire_value(HashKind::Uuid, &[0; 15], 0).is_err());
        assert!(hash_wire_value(HashKind::Bool, &[], 0).is_err());
        assert!(matches!(hash_wire_value(HashKind::Numeric, &[0; 7], 0), Err(HashError::MalformedNumeric(_))));
        let mut short = numeric_wire(0, NUMERIC_POS, 0, &[1, 2]);
        short.pop();
        assert!(matches!(hash_wire_value(HashKind::Numeric, &short, 0), Err(HashError::MalformedNumeric(_))));
        let bad_digit = numeric_wire(0, NUMERIC_POS, 0, &[10_000]);
        assert!(matches!(hash_wire_value(HashKind::Numeric, &bad_digit, 0), Err(HashError::MalformedNumeric(_))));
        let bad_sign = numeric_wire(0, 0x8000, 0, &[1]);
        assert!(matches!(hash_wire_value(HashKind::Numeric, &bad_sign, 0), Err(HashError::MalformedNumeric(_))));
        let bad_scale = numeric_wire(0, NUMERIC_POS, 0x4000, &[1]);
        assert!(matches!(hash_wire_value(HashKind::Numeric, &bad_scale, 0), Err(HashError::MalformedNumeric(_))));
        assert_eq!(hash_remainder(&[], 0), Err(HashError::ZeroModulus));
    }

    #[test]
    fn partition_hash_skips_nulls_and_combines_in_order() {
        let a = 42i32.to_be_bytes();
        let b = b"abc";
        assert_eq!(partition_hash(&[]).unwrap(), 0);
        assert_eq!(partition_hash(&[(HashKind::Int4, None), (HashKind::Text, None)]).unwrap(), 0);
        let ha = hash(HashKind::Int4, &a, HASH_PARTITION_SEED);
        let hb = hash(HashKind::Text, b, HASH_PARTITION_SEED);
        assert_eq!(partition_hash(&[(HashKind::Int4, Some(&a))]).unwrap(), hash_combine64(0, ha));
        assert_eq!(partition_hash(&[(HashKind::Int4, None), (HashKind::Text, Some(b))]).unwrap(), hash_combine64(0, hb));
        let both = partition_hash(&[(HashKind::Int4, Some(&a)), (HashKind::Text, Some(b))]).unwrap();
        assert_eq!(both, hash_combine64(hash_combine64(0, ha), hb));
        assert_ne!(both, partition_hash(&[(HashKind::Text, Some(b)), (HashKind::Int4, Some(&a))]).unwrap());
    }

    #[test]
    fn type_oids_map_to_their_hash_functions() {
        let expected = [
            (16, HashKind::Bool),
            (21, HashKind::Int2),
            (23, HashKind::Int4),
            (20, HashKind::Int8),
            (700, HashKind::Float4),
            (701, HashKind::Float8),
            (1700, HashKind::Numeric),
            (25, HashKind::Text),
            (1043, HashKind::Text),
            (19, HashKind::Text),
            (1042, HashKind::Bpchar),
            (17, HashKind::Bytea),
            (1082, HashKind::Date),
            (1114, HashKind::Timestamp),
            (1184, HashKind::Timestamptz),
            (2950, HashKind::Uuid),
            (26, HashKind::Oid),
        ];
        for (oid, kind) in expected {
            assert_eq!(HashKind::from_type_oid(oid), Some(kind), "type oid {oid}");
        }
        // json (114), time (1083), "char" (18): not supported.
        for oid in [114, 1083, 18, 0] {
            assert_eq!(HashKind::from_type_oid(oid), None, "type oid {oid}");
        }
    }

    proptest! {
        #[test]
        fn int8_in_int4_range_hashes_like_int4(v in any::<i32>(), seed in any::<u64>()) {
            let as_int8 = hash(HashKind::Int8, &i64::from(v).to_be_bytes(), seed);
            prop_assert_eq!(as_int8, hash(HashKind::Int4, &v.to_be_bytes(), seed));
            prop_assert_eq!(as_int8, hash_uint32_extended(v as u32, seed));
        }

        #[test]
        fn int2_hashes_like_int4(v in any::<i16>(), seed in any::<u64>()) {
            prop_assert_eq!(hash(HashKind::Int2, &v.to_be_bytes(), seed), hash(HashKind::Int4, &i32::from(v).to_be_bytes(), seed));
        }

        #[test]
        fn uint32_hash_is_the_byte_hash_of_its_le_bytes(v in any::<u32>(), seed in any::<u64>()) {
            prop_assert_eq!(hash_uint32_extended(v, seed), hash_bytes_extended(&v.to_le_bytes(), seed));
        }

        #[test]
        fn float4_hashes_like_the_float8_it_widens_to(v in any::<f32>(), seed in any::<u64>()) {
            prop_assert_eq!(hash(HashKind::Float4, &v.to_be_bytes(), seed), hash(HashKind::Float8, &f64::from(v).to_be_bytes(), seed));
        }

        #[test]
        fn remainder_is_below_the_modulus(
            a in any::<i64>(),
            s in ".{0,40}",
            null_a in any::<bool>(),
            modulus in 1u64..1000,
        ) {
            let a = a.to_be_bytes();
            let keys = [(HashKind::Int8, (!null_a).then_some(&a[..])), (HashKind::Text, Some(s.as_bytes()))];
            let r = hash_remainder(&keys, modulus).unwrap();
            prop_assert!(r < modulus);
            prop_assert_eq!(r, partition_hash(&keys).unwrap() % modulus);
        }
    }
}
