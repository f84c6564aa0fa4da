//! The `accounts` workload: `pgbench_accounts` as `pgbench -i` fills it, the
//! table of the published range- and hash-partitioning COPY figures.

use super::Workload;
use super::text::push_u64;
use crate::ident::quote_ident;
use crate::value::PgType;

/// Accounts per branch, as in pgbench (`naccounts`).
const ACCOUNTS_PER_BRANCH: u64 = 100_000;

/// The `accounts` workload: `aid int, bid int, abalance int, filler
/// char(84)`. Row `seq` is account `aid = seq + 1` of branch
/// `bid = (aid - 1) / 100000 + 1` with a zero balance and an empty filler,
/// which `char(84)` pads to 84 blanks (what pgbench stores). Its partition
/// key is the integer `aid`, as with `pgbench -i --partitions`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Accounts;

impl Accounts {
    #[inline]
    fn aid_bid(seq: u64) -> (i32, i32) {
        ((seq + 1) as i32, (seq / ACCOUNTS_PER_BRANCH + 1) as i32)
    }
}

impl Workload for Accounts {
    fn identity(&self) -> String {
        "accounts v1".to_owned()
    }

    fn columns(&self) -> Vec<(String, PgType)> {
        [("aid", PgType::Int4), ("bid", PgType::Int4), ("abalance", PgType::Int4), ("filler", PgType::Bpchar)]
            .into_iter()
            .map(|(n, t)| (n.to_owned(), t))
            .collect()
    }

    fn column_sql(&self) -> Vec<String> {
        let ty = |t| if t == PgType::Int4 { "int" } else { "char(84)" };
        self.columns().into_iter().map(|(name, t)| format!("{} {}", quote_ident(&name), ty(t))).collect()
    }

    fn encode_row(&self, seq: u64, out: &mut Vec<u8>) {
        let (aid, bid) = Self::aid_bid(seq);
        let mut w = crate::encode::CopyWriter::resume(out);
        w.row(4);
        w.int4(aid);
        w.int4(bid);
        w.int4(0);
        w.bytes(b"");
    }

    fn write_csv(&self, seq: u64, out: &mut Vec<u8>) {
        let (aid, bid) = Self::aid_bid(seq);
        push_u64(out, aid as u64);
        out.push(b',');
        push_u64(out, bid as u64);
        // Quoted: in CSV an unquoted empty field would be NULL.
        out.extend_from_slice(b",0,\"\"\n");
    }

    fn time_micros(&self, seq: u64) -> i64 {
        Self::aid_bid(seq).0.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests_support::{csv_fields, decode_row};

    #[test]
    fn rows_are_pgbench_accounts() {
        let g = Accounts;
        let line = |seq| {
            let mut out = Vec::new();
            g.write_csv(seq, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(line(0), "1,1,0,\"\"\n");
        assert_eq!(line(99_999), "100000,1,0,\"\"\n");
        assert_eq!(line(100_000), "100001,2,0,\"\"\n");
        assert_eq!(g.time_micros(41), 42);
        for seq in [0, 99_999, 100_000, 2_147_483_646] {
            let mut bin = Vec::new();
            g.encode_row(seq, &mut bin);
            let fields = decode_row(&bin);
            let mut csv = Vec::new();
            g.write_csv(seq, &mut csv);
            let text = csv_fields(&csv);
            for i in 0..3 {
                assert_eq!(i32::from_be_bytes(fields[i].clone().unwrap().try_into().unwrap()).to_string(), text[i]);
            }
            assert_eq!(fields[3].as_deref(), Some(&b""[..]));
            assert_eq!(text[3], "");
        }
        assert_eq!(g.create_table_sql("a"), "CREATE TABLE a (\"aid\" int, \"bid\" int, \"abalance\" int, \"filler\" char(84))");
    }
}
