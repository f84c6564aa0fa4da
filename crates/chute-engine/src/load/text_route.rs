//! Rows the server parses, routed on their key all the same.
//!
//! A row with a value the client's fast path does not know travels as text
//! through the parent, and the server routes it. But the server cannot create
//! a missing time partition: such a row used to fail with 23514 where an ISO
//! timestamp got its partition just in time, and a key no partition may hold
//! (beyond `--max-future`, past retention) was refused without its reason.
//! So the key of such a row is routed here too: encoded by the fast path when
//! it can (only another column needed the server), else collected per chunk
//! and cast by the server in one round trip on the control connection, which
//! has the load's session settings (TimeZone, DateStyle), and with the key
//! column's typmod, so it is the value the server will store. The row itself
//! still goes as text, as the server parses it.

use std::error::Error;

use chute_core::parse::Fields;
use chute_core::rowenc::RowEncoder;
use chute_core::value::ValueError;
use tokio_postgres::types::{FromSql, Type};

use super::model::{Filed, PendingPart, Reject, RowPos, ServerKeyed, Target};
use super::routing::RouteCtx;
use super::routing::{LeafRef, Routed, Routing};

/// Files a text row (already written to `row`) of the load's table `table`
/// (`routing`'s): routed on its key when the table has a policy, else to the
/// parent as before.
#[allow(clippy::too_many_arguments)]
pub fn file_text_row(
    encoder: &RowEncoder,
    (table, routing): (u16, &Routing),
    rc: &RouteCtx,
    fields: &Fields,
    row: &[u8],
    raw: &[u8],
    at: RowPos,
    filed: &mut Filed,
) {
    let Some(j) = routing.jit() else { return file_routed((table, routing), Routed::To(LeafRef::Parent), row, raw, at, None, filed) };
    let field = j.key_field();
    let mut wire = Vec::new();
    let routed = match fields.get(field) {
        None => routing.route_key(rc, None),
        Some(text) => match encoder.encode_value(field, text, &mut wire) {
            Ok(()) => routing.route_key(rc, Some(&wire)),
            Err(ValueError::NeedsServer) if table == 0 => {
                filed.server_keys.push(ServerKeyed { key: text.to_vec(), row: row.to_vec(), raw: raw.to_vec(), at });
                return;
            }
            Err(ValueError::NeedsServer) => {
                // The server casts keys of a load's first table only (`resolve`).
                let reason = format!(
                    "the partition key {:?} needs the server's parser, which a load of several tables has for its first only",
                    text
                );
                filed.rejects.push(Reject::new(at.input, at.line, raw.to_vec(), reason));
                return;
            }
            // The server rejects the row with its own message.
            Err(ValueError::Invalid(_)) => Routed::To(LeafRef::Parent),
        },
    };
    file_routed((table, routing), routed, row, raw, at, Some(wire), filed)
}

/// Has the server cast the keys of `keyed` (one round trip; one per key if
/// some key is invalid) and files their rows.
pub(crate) async fn resolve(control: &tokio_postgres::Client, routing: &Routing, keyed: Vec<ServerKeyed>, filed: &mut Filed) {
    let Some(j) = routing.jit() else {
        for k in keyed {
            file_routed((0, routing), Routed::To(LeafRef::Parent), &k.row, &k.raw, k.at, None, filed);
        }
        return;
    };
    let sql = format!("SELECT x::{} FROM unnest($1::text[]) WITH ORDINALITY AS u(x, n) ORDER BY n", j.key_cast);
    let texts: Vec<String> = keyed.iter().map(|k| String::from_utf8_lossy(&k.key).into_owned()).collect();
    let wires: Vec<Option<Wire>> = match control.query(&sql, &[&texts]).await {
        Ok(rows) if rows.len() == keyed.len() => rows.iter().map(|r| r.get::<_, Option<Wire>>(0)).collect(),
        _ => {
            let mut each = Vec::with_capacity(texts.len());
            for t in &texts {
                // An invalid key: the row goes to the server, which rejects it with its own message.
                let one = control.query_one(&sql, &[&vec![t.as_str()]]).await.ok();
                each.push(one.and_then(|r| r.get::<_, Option<Wire>>(0)).or(Some(Wire::Invalid)));
            }
            each
        }
    };
    let rc = routing.ctx();
    for (k, wire) in keyed.into_iter().zip(wires) {
        let routed = match &wire {
            Some(Wire::Invalid) => Routed::To(LeafRef::Parent),
            Some(Wire::Value(w)) => routing.route_key(&rc, Some(w)),
            None => routing.route_key(&rc, None),
        };
        let key = match wire {
            Some(Wire::Value(w)) => Some(w),
            _ => None,
        };
        file_routed((0, routing), routed, &k.row, &k.raw, k.at, key, filed);
    }
}

/// Files a text row routed on its key (`key`: its wire value, kept for a
/// row that waits for its partition).
fn file_routed(
    (table, routing): (u16, &Routing),
    routed: Routed,
    row: &[u8],
    raw: &[u8],
    at: RowPos,
    key: Option<Vec<u8>>,
    filed: &mut Filed,
) {
    match routed {
        Routed::To(leaf) if routing.is_committed(leaf, true, at.input, at.offset) => filed.skipped += 1,
        Routed::To(leaf) => {
            filed.segment(Target { table, leaf, text: true }).push(row, raw, at.line, at.input);
        }
        Routed::Missing { start } => filed.pending.push(PendingPart {
            table,
            start,
            row: row.to_vec(),
            raw: raw.to_vec(),
            line: at.line,
            offset: at.offset,
            range: at.range,
            key: Some(key.unwrap_or_default()),
            ack: None,
        }),
        Routed::Reject(reason) => filed.rejects.push(Reject::new(at.input, at.line, raw.to_vec(), reason)),
    }
}

/// A value in its binary wire form, whatever its type.
enum Wire {
    Value(Vec<u8>),
    /// The server could not parse the key.
    Invalid,
}

impl<'a> FromSql<'a> for Wire {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Wire::Value(raw.to_vec()))
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}
