//! The `lineitem` workload: the 7-column cut of TPC-H's `lineitem` used in
//! parallel-COPY experiments (four bigints, two dates, a CHAR(25)), with
//! TPC-H's value ranges so that hash distribution and date partitioning see
//! realistic keys.
//!
//! Rows are addressable by sequence number although orders have 1 to 7 lines:
//! the sequence is cut into blocks of 28 rows (1 + 2 + … + 7) holding seven
//! orders whose line counts are a shuffled 1..=7, so every line count is
//! equally likely, as in TPC-H, and a row's order is found without looking
//! at the rows before its block.

use super::text::{days_from_civil, push_date, push_u64};
use super::{SplitMix64, Workload, derive_seed};
use crate::ident::quote_ident;
use crate::value::PgType;

/// TPC-H's first and last order-system date (STARTDATE, ENDDATE).
const START_DAY: i64 = days_from_civil(1992, 1, 1);
const END_DAY: i64 = days_from_civil(1998, 12, 31);
/// Orders are placed early enough that every line ships by ENDDATE.
const LAST_ORDER_DAY: i64 = END_DAY - 151;
/// Rows per block: orders of 1, 2, …, 7 lines.
const BLOCK_ROWS: u64 = 28;
const ORDERS_PER_BLOCK: u64 = 7;

const COMMENT_LEN: usize = 25;

/// Words of the comments, in the spirit of TPC-H's text grammar.
pub(crate) const WORDS: &[&str] = &[
    "furiously",
    "slyly",
    "carefully",
    "blithely",
    "quickly",
    "fluffily",
    "ironic",
    "final",
    "regular",
    "express",
    "pending",
    "special",
    "even",
    "bold",
    "silent",
    "deposits",
    "requests",
    "packages",
    "accounts",
    "ideas",
    "theodolites",
    "instructions",
    "foxes",
    "pinto",
    "beans",
    "asymptotes",
    "platelets",
    "dependencies",
    "excuses",
    "courts",
    "dolphins",
    "sleep",
    "wake",
    "haggle",
    "nag",
    "cajole",
    "boost",
    "detect",
    "integrate",
    "use",
    "among",
    "above",
    "along",
    "across",
    "after",
    "against",
    "the",
    "about",
];

/// The `lineitem` workload: `l_orderkey bigint, l_partkey bigint, l_suppkey
/// bigint, l_linenumber bigint, l_shipdate date, l_commitdate date,
/// l_comment char(25)`.
///
/// Order keys increase with the sequence and leave TPC-H's gaps (8 of every
/// 32 keys used); part keys are uniform over 200,000 × scale, supplier keys
/// follow from the part key by TPC-H's formula over 10,000 × scale
/// suppliers; the ship date is 1 to 121 days and the commit date 30 to 90
/// days after the order date, which is uniform over 1992-01-01 to
/// 1998-08-02 (so every date lies in 1992-01-01..1998-12-31); the comment is
/// 10 to 25 characters of words. Its partition key is `l_shipdate`.
#[derive(Debug, Clone)]
pub struct Lineitem {
    seed: u64,
    /// TPC-H scale factor, at least 1.
    scale: u32,
}

/// One generated row.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LineRow {
    orderkey: i64,
    partkey: i64,
    suppkey: i64,
    linenumber: i64,
    /// Days since 1970-01-01.
    shipdate: i64,
    commitdate: i64,
    comment: [u8; COMMENT_LEN],
    comment_len: usize,
}

impl Lineitem {
    /// TPC-H's lineitem has about six million rows per unit of scale.
    pub const ROWS_PER_SCALE: u64 = 6_000_000;

    pub fn new(seed: u64, scale: u32) -> Self {
        Lineitem { seed, scale: scale.max(1) }
    }

    /// The block's orders: their line counts, a shuffled 1..=7.
    fn block_orders(&self, block: u64) -> [u64; ORDERS_PER_BLOCK as usize] {
        let mut lines = [1, 2, 3, 4, 5, 6, 7];
        let mut rng = SplitMix64::new(derive_seed(self.seed, &[2, block]));
        for i in (1..lines.len()).rev() {
            lines.swap(i, rng.below(i as u64 + 1) as usize);
        }
        lines
    }

    fn row(&self, seq: u64) -> LineRow {
        let (block, mut at) = (seq / BLOCK_ROWS, seq % BLOCK_ROWS);
        let mut order = 0;
        for lines in self.block_orders(block) {
            if at < lines {
                break;
            }
            at -= lines;
            order += 1;
        }
        let order_index = block * ORDERS_PER_BLOCK + order;
        let orderkey = (order_index / 8 * 32 + order_index % 8 + 1) as i64;
        let orderdate =
            START_DAY + SplitMix64::new(derive_seed(self.seed, &[3, order_index])).below((LAST_ORDER_DAY - START_DAY + 1) as u64) as i64;

        let mut rng = SplitMix64::new(derive_seed(self.seed, &[1, seq]));
        let parts = 200_000 * u64::from(self.scale);
        let suppliers = 10_000 * u64::from(self.scale);
        let partkey = 1 + rng.below(parts);
        let supplier = rng.below(4);
        let suppkey = (partkey + supplier * (suppliers / 4 + (partkey - 1) / suppliers)) % suppliers + 1;
        let shipdate = orderdate + 1 + rng.below(121) as i64;
        let commitdate = orderdate + 30 + rng.below(61) as i64;

        let mut comment = [b' '; COMMENT_LEN];
        let target = 10 + rng.below(16) as usize;
        let mut len = 0;
        while len < target {
            if len > 0 {
                len += 1;
            }
            let word = WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes();
            let take = word.len().min(COMMENT_LEN - len);
            comment[len..len + take].copy_from_slice(&word[..take]);
            len = (len + take).min(COMMENT_LEN);
        }
        // char(n) ignores trailing blanks; leaving them out keeps CSV and binary alike.
        let mut comment_len = len;
        while comment[comment_len - 1] == b' ' {
            comment_len -= 1;
        }
        LineRow {
            orderkey,
            partkey: partkey as i64,
            suppkey: suppkey as i64,
            linenumber: at as i64 + 1,
            shipdate,
            commitdate,
            comment,
            comment_len,
        }
    }
}

impl Workload for Lineitem {
    fn identity(&self) -> String {
        format!("lineitem v1 seed={} scale={}", self.seed, self.scale)
    }

    fn columns(&self) -> Vec<(String, PgType)> {
        [
            ("l_orderkey", PgType::Int8),
            ("l_partkey", PgType::Int8),
            ("l_suppkey", PgType::Int8),
            ("l_linenumber", PgType::Int8),
            ("l_shipdate", PgType::Date),
            ("l_commitdate", PgType::Date),
            ("l_comment", PgType::Bpchar),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t))
        .collect()
    }

    fn column_sql(&self) -> Vec<String> {
        self.columns()
            .into_iter()
            .map(|(name, ty)| {
                let ty = match ty {
                    PgType::Int8 => "bigint",
                    PgType::Date => "date",
                    _ => "char(25)",
                };
                format!("{} {ty}", quote_ident(&name))
            })
            .collect()
    }

    fn encode_row(&self, seq: u64, out: &mut Vec<u8>) {
        let r = self.row(seq);
        let mut w = crate::encode::CopyWriter::resume(out);
        w.row(7);
        w.int8(r.orderkey);
        w.int8(r.partkey);
        w.int8(r.suppkey);
        w.int8(r.linenumber);
        w.date_unix_days(r.shipdate as i32);
        w.date_unix_days(r.commitdate as i32);
        // bpchar's binary input pads to the column's length, as its text input does.
        w.bytes(&r.comment[..r.comment_len]);
    }

    fn write_csv(&self, seq: u64, out: &mut Vec<u8>) {
        let r = self.row(seq);
        for v in [r.orderkey, r.partkey, r.suppkey, r.linenumber] {
            push_u64(out, v as u64);
            out.push(b',');
        }
        push_date(out, r.shipdate);
        out.push(b',');
        push_date(out, r.commitdate);
        out.push(b',');
        // Words and single spaces only: nothing CSV needs to quote.
        out.extend_from_slice(&r.comment[..r.comment_len]);
        out.push(b'\n');
    }

    fn time_micros(&self, seq: u64) -> i64 {
        self.row(seq).shipdate * 86_400_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests_support::{csv_fields, decode_row};

    #[test]
    fn orders_have_one_to_seven_lines_and_increasing_keys() {
        let g = Lineitem::new(7, 1);
        let rows: Vec<LineRow> = (0..28 * 200).map(|s| g.row(s)).collect();
        let mut per_order = std::collections::BTreeMap::new();
        let mut prev: Option<&LineRow> = None;
        for r in &rows {
            *per_order.entry(r.orderkey).or_insert(0) += 1;
            if let Some(p) = prev {
                if p.orderkey == r.orderkey {
                    assert_eq!(r.linenumber, p.linenumber + 1);
                } else {
                    assert!(r.orderkey > p.orderkey);
                    assert_eq!(r.linenumber, 1);
                }
            }
            prev = Some(r);
            assert!((1..=200_000).contains(&r.partkey) && (1..=10_000).contains(&r.suppkey));
            assert!((START_DAY..=END_DAY).contains(&r.shipdate) && (START_DAY..=END_DAY).contains(&r.commitdate));
            assert!((10..=25).contains(&r.comment_len), "{}", String::from_utf8_lossy(&r.comment));
        }
        assert_eq!(per_order.len(), 1400);
        let mut counts = [0; 8];
        for n in per_order.values() {
            counts[*n] += 1;
        }
        assert_eq!(counts, [0, 200, 200, 200, 200, 200, 200, 200]);
        assert_eq!(rows[0].orderkey, 1);
        assert_eq!(*per_order.keys().last().unwrap(), 1399 / 8 * 32 + 1399 % 8 + 1);
        // Lines of one order share its date, so they ship within 121 days of each other.
        let tail = g.row(28 * 5 + 27);
        assert_eq!(tail.linenumber, g.block_orders(5)[6] as i64);
    }

    #[test]
    fn rows_are_stable_by_sequence_number_and_seed() {
        let g = Lineitem::new(1, 3);
        let mut a = Vec::new();
        for s in 0..500 {
            g.write_csv(s, &mut a);
        }
        let mut b = Vec::new();
        for s in (0..500).rev() {
            let mut line = Vec::new();
            g.write_csv(s, &mut line);
            b.splice(0..0, line);
        }
        assert_eq!(a, b);
        let mut c = Vec::new();
        Lineitem::new(2, 3).write_csv(0, &mut c);
        assert_ne!(a[..c.len()], c[..]);
        assert!((0..500).all(|s| g.row(s).partkey <= 600_000 && g.row(s).suppkey <= 30_000));
    }

    #[test]
    fn binary_rows_hold_the_csv_values() {
        let g = Lineitem::new(42, 1);
        for seq in [0, 1, 27, 28, 12_345, 5_999_999] {
            let mut bin = Vec::new();
            g.encode_row(seq, &mut bin);
            let fields = decode_row(&bin);
            let mut csv = Vec::new();
            g.write_csv(seq, &mut csv);
            let text = csv_fields(&csv);
            assert_eq!(fields.len(), 7);
            for i in 0..4 {
                let v = i64::from_be_bytes(fields[i].clone().unwrap().try_into().unwrap());
                assert_eq!(v.to_string(), text[i]);
            }
            for i in 4..6 {
                let days = i32::from_be_bytes(fields[i].clone().unwrap().try_into().unwrap());
                let date = jiff::civil::date(2000, 1, 1).checked_add(jiff::Span::new().days(i64::from(days))).unwrap();
                assert_eq!(date.to_string(), text[i]);
            }
            assert_eq!(String::from_utf8(fields[6].clone().unwrap()).unwrap(), text[6]);
            assert_eq!(g.time_micros(seq) / 86_400_000_000, g.row(seq).shipdate);
        }
        assert_eq!(
            g.create_table_sql("lineitem"),
            "CREATE TABLE lineitem (\"l_orderkey\" bigint, \"l_partkey\" bigint, \"l_suppkey\" bigint, \"l_linenumber\" bigint, \
             \"l_shipdate\" date, \"l_commitdate\" date, \"l_comment\" char(25))"
        );
    }
}
