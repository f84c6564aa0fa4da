//! The `orders` workload: the history of an online shop's orders table,
//! shaped like the one whose live partitioning was published (an id, the
//! creation time the table is partitioned by, a status along the order's
//! lifecycle, a customer, amounts, and wide text columns), for `chute
//! simulate --create` and `chute gen orders`.
//!
//! Rows come in time order: row `seq` is order `seq + 1`, created at
//! `start + seq × step` plus a jitter below one step, so ids and creation
//! times rise together as in a real shop and a year of history is a range of
//! sequence numbers the loader can split like any other workload.

use super::lineitem::WORDS;
use super::text::{push_timestamp, push_u64};
use super::{SplitMix64, Workload, derive_seed};
use crate::ident::quote_ident;
use crate::value::{EncodeContext, PgType, encode_text};

/// An order's statuses in lifecycle order: inserted as the first, each
/// update moves it one step on.
pub const LIFECYCLE: [&str; 4] = ["placed", "paid", "shipped", "delivered"];

/// Orders of the history that never completed.
const CANCELLED: &str = "cancelled";

/// The `orders` workload: `id bigint, created_at timestamptz, updated_at
/// timestamptz, status text, customer_id bigint, amount numeric(12,2), tax
/// numeric(12,2), note1..noteN text`. History rows are `delivered` (4% are
/// `cancelled`), were last updated 1 to 5 days after they were created,
/// belong to one of `customers` customers (uniform) and carry notes of 30
/// to 60 characters of words. Its partition key is `created_at`.
#[derive(Debug, Clone)]
pub struct Orders {
    /// The first order's creation time, microseconds since the Unix epoch.
    pub start_micros: i64,
    /// Time between two orders (at least 1).
    pub step_micros: i64,
    /// At least 1.
    pub customers: u64,
    /// Wide text columns (note1..noteN).
    pub text_columns: u16,
    pub seed: u64,
}

/// One generated order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRow {
    pub id: i64,
    pub created_micros: i64,
    pub updated_micros: i64,
    pub status: &'static str,
    pub customer_id: i64,
    /// Cents.
    pub amount_cents: u64,
    pub tax_cents: u64,
    pub notes: Vec<String>,
}

impl Orders {
    /// Shortest and longest note, in characters.
    pub const NOTE_LEN: (usize, usize) = (30, 60);

    /// Row `seq`: always the same order for the same parameters.
    pub fn row(&self, seq: u64) -> OrderRow {
        let mut rng = SplitMix64::new(derive_seed(self.seed, &[7, seq]));
        let step = self.step_micros.max(1);
        let created = self.start_micros + seq as i64 * step + rng.below(step as u64) as i64;
        let updated = created + 86_400_000_000 + rng.below(4 * 86_400_000_000) as i64;
        let status = if rng.below(100) < 4 { CANCELLED } else { LIFECYCLE[3] };
        let customer_id = 1 + rng.below(self.customers.max(1)) as i64;
        let amount_cents = 500 + rng.below(50_000);
        let tax_cents = amount_cents * 19 / 100;
        let notes = (0..self.text_columns).map(|_| note(&mut rng)).collect();
        OrderRow {
            id: seq as i64 + 1,
            created_micros: created,
            updated_micros: updated,
            status,
            customer_id,
            amount_cents,
            tax_cents,
            notes,
        }
    }

    /// The column names of the notes.
    pub fn note_columns(&self) -> impl Iterator<Item = String> {
        (1..=self.text_columns).map(|i| format!("note{i}"))
    }
}

/// 30 to 60 characters of words separated by single spaces.
pub fn note(rng: &mut SplitMix64) -> String {
    let (lo, hi) = Orders::NOTE_LEN;
    let target = lo + rng.below((hi - lo + 1) as u64) as usize;
    let mut s = String::with_capacity(hi + 16);
    while s.len() < target {
        if !s.is_empty() {
            s.push(' ');
        }
        s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    s.truncate(target);
    // A note never ends in a blank (it would read back the same, but look odd).
    if s.ends_with(' ') {
        s.pop();
        s.push('.');
    }
    s
}

/// `1234` cents as `12.34`.
pub fn push_cents(out: &mut Vec<u8>, cents: u64) {
    push_u64(out, cents / 100);
    out.push(b'.');
    out.push(b'0' + (cents / 10 % 10) as u8);
    out.push(b'0' + (cents % 10) as u8);
}

impl Workload for Orders {
    fn identity(&self) -> String {
        format!(
            "orders v1 start={} step={} customers={} text_columns={} seed={}",
            self.start_micros, self.step_micros, self.customers, self.text_columns, self.seed
        )
    }

    fn columns(&self) -> Vec<(String, PgType)> {
        let mut c: Vec<(String, PgType)> = [
            ("id", PgType::Int8),
            ("created_at", PgType::Timestamptz),
            ("updated_at", PgType::Timestamptz),
            ("status", PgType::Text),
            ("customer_id", PgType::Int8),
            ("amount", PgType::Numeric),
            ("tax", PgType::Numeric),
        ]
        .into_iter()
        .map(|(n, t)| (n.to_owned(), t))
        .collect();
        c.extend(self.note_columns().map(|n| (n, PgType::Text)));
        c
    }

    /// The id is an identity column (so new orders get the next id from the
    /// server), the amounts have cents; the primary key and indexes are made
    /// after a load, where they cost less.
    fn column_sql(&self) -> Vec<String> {
        self.columns()
            .into_iter()
            .map(|(name, ty)| {
                let ty = match name.as_str() {
                    "id" => "bigint GENERATED BY DEFAULT AS IDENTITY",
                    "created_at" => "timestamptz NOT NULL DEFAULT now()",
                    "status" => "text NOT NULL",
                    "customer_id" => "bigint NOT NULL",
                    "amount" | "tax" => "numeric(12,2)",
                    _ => ty.name(),
                };
                format!("{} {ty}", quote_ident(&name))
            })
            .collect()
    }

    fn encode_row(&self, seq: u64, out: &mut Vec<u8>) {
        let r = self.row(seq);
        let mut w = crate::encode::CopyWriter::resume(out);
        w.row(7 + self.text_columns as i16);
        w.int8(r.id);
        w.timestamp_unix_micros(r.created_micros);
        w.timestamp_unix_micros(r.updated_micros);
        w.bytes(r.status.as_bytes());
        w.int8(r.customer_id);
        let mut text = Vec::with_capacity(16);
        for cents in [r.amount_cents, r.tax_cents] {
            text.clear();
            push_cents(&mut text, cents);
            w.with_len(|b| encode_text(PgType::Numeric, &text, &EncodeContext::default(), b).expect("a plain decimal is a numeric"));
        }
        for n in &r.notes {
            w.bytes(n.as_bytes());
        }
    }

    fn write_csv(&self, seq: u64, out: &mut Vec<u8>) {
        let r = self.row(seq);
        push_u64(out, r.id as u64);
        out.push(b',');
        push_timestamp(out, r.created_micros);
        out.push(b',');
        push_timestamp(out, r.updated_micros);
        out.push(b',');
        out.extend_from_slice(r.status.as_bytes());
        out.push(b',');
        push_u64(out, r.customer_id as u64);
        for cents in [r.amount_cents, r.tax_cents] {
            out.push(b',');
            push_cents(out, cents);
        }
        // Words and single spaces: nothing CSV needs to quote.
        for n in &r.notes {
            out.push(b',');
            out.extend_from_slice(n.as_bytes());
        }
        out.push(b'\n');
    }

    fn time_micros(&self, seq: u64) -> i64 {
        self.row(seq).created_micros
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::tests_support::{csv_fields, decode_row};

    fn orders() -> Orders {
        Orders { start_micros: 1_700_000_000_000_000, step_micros: 60_000_000, customers: 500, text_columns: 3, seed: 9 }
    }

    #[test]
    fn ids_and_times_rise_together_and_values_stay_in_range() {
        let g = orders();
        let rows: Vec<OrderRow> = (0..2000).map(|s| g.row(s)).collect();
        for (seq, w) in rows.windows(2).enumerate() {
            assert_eq!(w[0].id, seq as i64 + 1);
            assert!(w[1].created_micros > w[0].created_micros, "seq {seq}");
        }
        for r in &rows {
            assert!(r.created_micros >= g.start_micros && r.created_micros < g.start_micros + 2000 * g.step_micros);
            assert!(r.updated_micros > r.created_micros);
            assert!((1..=500).contains(&r.customer_id));
            assert!(r.status == "delivered" || r.status == "cancelled");
            assert_eq!(r.notes.len(), 3);
            for n in &r.notes {
                assert!((30..=60).contains(&n.len()) && !n.ends_with(' ') && !n.contains("  "), "{n:?}");
            }
        }
        let cancelled = rows.iter().filter(|r| r.status == "cancelled").count();
        assert!((30..130).contains(&cancelled), "about 4% cancelled: {cancelled}");
        assert_eq!(g.row(1234), orders().row(1234), "a row is a function of its sequence number");
        assert_ne!(Orders { seed: 10, ..orders() }.row(5).notes, g.row(5).notes);
    }

    #[test]
    fn binary_and_csv_rows_hold_the_same_values() {
        let g = orders();
        for seq in [0, 1, 999, 123_456] {
            let mut bin = Vec::new();
            g.encode_row(seq, &mut bin);
            let fields = decode_row(&bin);
            let mut csv = Vec::new();
            g.write_csv(seq, &mut csv);
            let text = csv_fields(&csv);
            assert_eq!(fields.len(), 10);
            assert_eq!(text.len(), 10);
            let r = g.row(seq);
            assert_eq!(i64::from_be_bytes(fields[0].clone().unwrap().try_into().unwrap()), r.id);
            assert_eq!(text[0], r.id.to_string());
            let micros = i64::from_be_bytes(fields[1].clone().unwrap().try_into().unwrap()) + 946_684_800_000_000;
            assert_eq!(micros, r.created_micros);
            assert_eq!(text[1], jiff::Timestamp::from_microsecond(r.created_micros).unwrap().to_string());
            assert_eq!(fields[3].as_deref(), Some(r.status.as_bytes()));
            assert_eq!(text[5], format!("{}.{:02}", r.amount_cents / 100, r.amount_cents % 100));
            // numeric_send of the amount: weight, sign and scale 2.
            let amount = fields[5].clone().unwrap();
            assert_eq!(&amount[6..8], &2u16.to_be_bytes(), "dscale 2");
            assert_eq!(fields[9].as_deref(), Some(text[9].as_bytes()));
            assert_eq!(g.time_micros(seq), r.created_micros);
        }
    }

    #[test]
    fn the_table_has_an_identity_id_and_cents() {
        let sql = orders().create_table_sql("orders");
        assert!(
            sql.starts_with("CREATE TABLE orders (\"id\" bigint GENERATED BY DEFAULT AS IDENTITY, \"created_at\" timestamptz NOT NULL")
        );
        assert!(sql.contains("\"amount\" numeric(12,2), \"tax\" numeric(12,2), \"note1\" text, \"note2\" text, \"note3\" text)"), "{sql}");
        let mut out = Vec::new();
        push_cents(&mut out, 5);
        push_cents(&mut out, 1230);
        assert_eq!(out, b"0.0512.30");
    }
}
