//! What the simulated application does to the table: the five kinds of
//! operation and their SQL, built once from the table's columns.
//!
//! The SQL names only what an orders application knows: an `id` the server
//! assigns, the time key (`created_at` unless `--key` says otherwise), a
//! `status` moved along the lifecycle and a `customer_id`. Every other
//! column gets a value of its type when it has no default (text of words,
//! amounts, numbers), so the simulator runs on a team's own orders table,
//! not only on the one `--create` makes. Each statement names the time key
//! of the row it touches, as an application that partitions by it must:
//! updates and lookups by id carry the creation time the insert returned,
//! so after a migration each touches one partition.
//!
//! Time bounds are parameters of the key's own type, never `now() - …` or a
//! text cast in the SQL: PostgreSQL prunes partitions while planning only
//! with values it knows then (a parameter's value in a custom plan), so a
//! stable expression would make every plan open and lock every partition.
//! The simulator computes "the last 7 days" on its own clock, as an
//! application does.

use chute_core::generate::{LIFECYCLE, SplitMix64, note};
use chute_core::ident::{QualifiedName, quote_ident};
use tokio_postgres::Client;

use super::SimError;

/// The kinds of operation, in report order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A new order (status `placed`).
    Insert,
    /// An order moves one step along its lifecycle.
    Update,
    /// A recent order fetched by id.
    ReadId,
    /// A customer's orders of the last days.
    ReadCustomer,
    /// Orders counted over a recent time range.
    ReadCount,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Insert, Kind::Update, Kind::ReadId, Kind::ReadCustomer, Kind::ReadCount];

    /// The column-name prefix in samples.csv and summary.csv.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Insert => "insert",
            Kind::Update => "update",
            Kind::ReadId => "read_id",
            Kind::ReadCustomer => "read_customer",
            Kind::ReadCount => "read_count",
        }
    }

    /// For people.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Insert => "insert (new order)",
            Kind::Update => "update (lifecycle)",
            Kind::ReadId => "read by id",
            Kind::ReadCustomer => "read a customer's orders",
            Kind::ReadCount => "count recent orders",
        }
    }

    pub fn is_read(self) -> bool {
        matches!(self, Kind::ReadId | Kind::ReadCustomer | Kind::ReadCount)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// An order the simulator inserted (or found at the start), as the
/// application keeps it: enough to find the row again in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub id: i64,
    /// The time key, as the server stores it.
    pub key: PgTime,
    pub customer: i64,
}

/// How a column of the table gets its value in an insert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    Customer,
    Status,
    /// Words, at most this many characters (varchar(n), char(n)).
    Text(Option<usize>),
    Amount,
    Integer,
    Bool,
    Json,
}

/// The table as the simulator uses it.
#[derive(Debug, Clone)]
pub struct Shape {
    pub table: QualifiedName,
    pub key: String,
    /// `format_type` of the key column.
    pub key_type: String,
    pub insert_sql: String,
    pub update_sql: String,
    pub read_id_sql: String,
    pub read_customer_sql: String,
    pub read_count_sql: String,
    /// Parameters of the insert, in order.
    fills: Vec<Fill>,
    /// Columns an insert leaves to their defaults (or NULL).
    pub defaulted: Vec<String>,
}

/// One column as the catalog describes it.
struct Column {
    name: String,
    format: String,
    typname: String,
    not_null: bool,
    has_default: bool,
    generated: bool,
    max_chars: Option<usize>,
}

const TIME_TYPES: [&str; 3] = ["timestamptz", "timestamp", "date"];
/// Keys the simulator can carry as parameters.
const KEY_TYPES: [&str; 2] = ["timestamptz", "timestamp"];

/// A `timestamptz` or `timestamp` value in PostgreSQL's binary form:
/// microseconds since 2000-01-01 00:00 UTC (for `timestamp`, since that
/// wall-clock time). Round-trips exactly, whatever the session's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PgTime(pub i64);

/// 2000-01-01 in microseconds since the Unix epoch.
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

impl PgTime {
    pub fn from_unix_micros(micros: i64) -> PgTime {
        PgTime(micros - PG_EPOCH_MICROS)
    }

    /// `seconds` before this moment.
    pub fn minus_s(self, seconds: f64) -> PgTime {
        PgTime(self.0 - (seconds * 1e6) as i64)
    }
}

impl std::fmt::Display for PgTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match jiff::Timestamp::from_microsecond(self.0 + PG_EPOCH_MICROS) {
            Ok(t) => write!(f, "{t}"),
            Err(_) => write!(f, "{} µs after 2000-01-01", self.0),
        }
    }
}

impl tokio_postgres::types::ToSql for PgTime {
    fn to_sql(
        &self,
        _: &tokio_postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<tokio_postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(&self.0.to_be_bytes());
        Ok(tokio_postgres::types::IsNull::No)
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        matches!(*ty, tokio_postgres::types::Type::TIMESTAMPTZ | tokio_postgres::types::Type::TIMESTAMP)
    }

    tokio_postgres::types::to_sql_checked!();
}

impl<'a> tokio_postgres::types::FromSql<'a> for PgTime {
    fn from_sql(_: &tokio_postgres::types::Type, raw: &'a [u8]) -> Result<PgTime, Box<dyn std::error::Error + Sync + Send>> {
        Ok(PgTime(i64::from_be_bytes(raw.try_into().map_err(|_| "a timestamp is 8 bytes")?)))
    }

    fn accepts(ty: &tokio_postgres::types::Type) -> bool {
        <PgTime as tokio_postgres::types::ToSql>::accepts(ty)
    }
}

impl Shape {
    /// Reads the table's columns and builds every statement; refuses a
    /// table the operations cannot run on, saying which column is missing.
    pub async fn read(client: &Client, table: &QualifiedName, key: &str) -> Result<Shape, SimError> {
        let info =
            chute_engine::catalog::table_info(client, table).await.map_err(|e| SimError::Setup(e.to_string()))?.ok_or_else(|| {
                SimError::Setup(format!(
                    "{table} does not exist: make an orders table with chute simulate --create --rows N (or name yours with --table)"
                ))
            })?;
        let rows = client
            .query(
                "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), t.typname::text, a.attnotnull,
                        a.atthasdef OR a.attidentity <> '', a.attgenerated <> '',
                        CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 4 THEN a.atttypmod - 4 END
                 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                 WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                &[&info.oid],
            )
            .await
            .map_err(SimError::sql("reading the table's columns"))?;
        let columns: Vec<Column> = rows
            .iter()
            .map(|r| Column {
                name: r.get(0),
                format: r.get(1),
                typname: r.get(2),
                not_null: r.get(3),
                has_default: r.get(4),
                generated: r.get(5),
                max_chars: r.get::<_, Option<i32>>(6).map(|n| n as usize),
            })
            .collect();
        Shape::build(info.name, key, &columns)
    }

    fn build(table: QualifiedName, key: &str, columns: &[Column]) -> Result<Shape, SimError> {
        let find = |name: &str| columns.iter().find(|c| c.name == name);
        let need = |name: &str, what: &str| {
            find(name).ok_or_else(|| {
                SimError::Setup(format!(
                    "{table} has no column {}: the simulator needs {what}; chute simulate --create makes an orders table that has",
                    quote_ident(name)
                ))
            })
        };
        let key_col = need(key, "the time key (choose it with --key)")?;
        if !KEY_TYPES.contains(&key_col.typname.as_str()) {
            return Err(SimError::Setup(format!(
                "the key {} of {table} is {}: the simulator needs a timestamptz or timestamp key",
                quote_ident(key),
                key_col.format
            )));
        }
        let id = need("id", "an order id the server assigns")?;
        if !id.has_default {
            return Err(SimError::Setup(format!(
                "{table}.id has no default: the simulator lets the server number new orders (make it an identity column or give it a sequence default)"
            )));
        }
        let status = need("status", "a text status for the order's lifecycle")?;
        let customer = need("customer_id", "the customer of each order")?;
        for (c, types) in [(status, &["text", "varchar", "bpchar"][..]), (customer, &["int2", "int4", "int8"][..])] {
            if !types.contains(&c.typname.as_str()) {
                return Err(SimError::Setup(format!(
                    "{table}.{} is {}: the simulator needs one of {}",
                    c.name,
                    c.format,
                    types.join(", ")
                )));
            }
        }
        let t = table.quoted();
        let k = quote_ident(key);
        let mut names = Vec::new();
        let mut values = Vec::new();
        let mut fills = Vec::new();
        let mut defaulted = Vec::new();
        for c in columns {
            let q = quote_ident(&c.name);
            if c.generated || c.name == "id" {
                continue;
            }
            let inline = if c.name == key || (c.name == "updated_at" && TIME_TYPES.contains(&c.typname.as_str())) {
                Some("now()".to_owned())
            } else if c.typname == "uuid" && !c.has_default {
                Some("gen_random_uuid()".to_owned())
            } else {
                None
            };
            if let Some(v) = inline {
                names.push(q);
                values.push(v);
                continue;
            }
            let fill = match (c.name.as_str(), c.typname.as_str()) {
                ("customer_id", _) => Some(Fill::Customer),
                ("status", _) => Some(Fill::Status),
                _ if c.has_default => None,
                (_, "text" | "varchar" | "bpchar") => Some(Fill::Text(c.max_chars)),
                (_, "numeric" | "float4" | "float8" | "money") => Some(Fill::Amount),
                (_, "int2" | "int4" | "int8") => Some(Fill::Integer),
                (_, "bool") => Some(Fill::Bool),
                (_, "json" | "jsonb") => Some(Fill::Json),
                (_, ty) if TIME_TYPES.contains(&ty) => {
                    names.push(q);
                    values.push("now()".to_owned());
                    continue;
                }
                _ if c.not_null => {
                    return Err(SimError::Setup(format!(
                        "{table}.{} is {} NOT NULL without a default: the simulator cannot make values of that type; give it a default",
                        c.name, c.format
                    )));
                }
                _ => None,
            };
            match fill {
                Some(f) => {
                    fills.push(f);
                    names.push(q);
                    values.push(format!("${}::text::{}", fills.len(), c.format));
                }
                None => defaulted.push(c.name.clone()),
            }
        }
        let insert_sql =
            format!("INSERT INTO {t} ({}) VALUES ({}) RETURNING id::int8, {k}, customer_id::int8", names.join(", "), values.join(", "));
        let touch = find("updated_at").filter(|c| TIME_TYPES.contains(&c.typname.as_str())).map_or("", |_| ", updated_at = now()");
        let update_sql = format!("UPDATE {t} SET status = $3::text{touch} WHERE id = $1::int8 AND {k} = $2 AND status = $4::text");
        let read_id_sql = format!("SELECT * FROM {t} WHERE id = $1::int8 AND {k} = $2");
        let read_customer_sql = format!("SELECT * FROM {t} WHERE customer_id = $1::int8 AND {k} >= $2 ORDER BY {k} DESC LIMIT 20");
        let read_count_sql = format!("SELECT count(*) FROM {t} WHERE {k} >= $1");
        Ok(Shape {
            table,
            key: key.to_owned(),
            key_type: key_col.format.clone(),
            insert_sql,
            update_sql,
            read_id_sql,
            read_customer_sql,
            read_count_sql,
            fills,
            defaulted,
        })
    }

    /// The insert's parameters for a new order of `customer`.
    pub fn insert_values(&self, customer: i64, rng: &mut SplitMix64) -> Vec<String> {
        self.fills
            .iter()
            .map(|f| match f {
                Fill::Customer => customer.to_string(),
                Fill::Status => LIFECYCLE[0].to_owned(),
                Fill::Text(max) => {
                    let mut n = note(rng);
                    if let Some(max) = max {
                        n.truncate(*max);
                    }
                    n
                }
                Fill::Amount => {
                    let cents = 500 + rng.below(50_000);
                    format!("{}.{:02}", cents / 100, cents % 100)
                }
                Fill::Integer => (1 + rng.below(1000)).to_string(),
                Fill::Bool => (rng.below(2) == 1).to_string(),
                Fill::Json => "{}".to_owned(),
            })
            .collect()
    }
}

/// The status after `stage` updates (0: just inserted).
pub fn status_after(stage: usize) -> &'static str {
    LIFECYCLE[stage.min(LIFECYCLE.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, typname: &str, has_default: bool) -> Column {
        Column {
            name: name.into(),
            format: match typname {
                "int8" => "bigint".into(),
                "timestamptz" => "timestamp with time zone".into(),
                "varchar" => "character varying(10)".into(),
                t => t.into(),
            },
            typname: typname.into(),
            not_null: false,
            has_default,
            generated: false,
            max_chars: (typname == "varchar").then_some(10),
        }
    }

    fn orders() -> Vec<Column> {
        vec![
            col("id", "int8", true),
            col("created_at", "timestamptz", true),
            col("updated_at", "timestamptz", false),
            col("status", "text", false),
            col("customer_id", "int8", false),
            col("amount", "numeric", false),
            col("note1", "varchar", false),
            col("extra", "point", false),
            col("flag", "bool", true),
        ]
    }

    #[test]
    fn statements_name_the_key_and_fill_what_has_no_default() {
        let s = Shape::build(QualifiedName::new("public", "orders"), "created_at", &orders()).unwrap();
        assert_eq!(
            s.insert_sql,
            "INSERT INTO \"public\".\"orders\" (\"created_at\", \"updated_at\", \"status\", \"customer_id\", \"amount\", \"note1\") \
             VALUES (now(), now(), $1::text::text, $2::text::bigint, $3::text::numeric, $4::text::character varying(10)) \
             RETURNING id::int8, \"created_at\", customer_id::int8"
        );
        assert!(
            s.update_sql
                .ends_with("SET status = $3::text, updated_at = now() WHERE id = $1::int8 AND \"created_at\" = $2 AND status = $4::text"),
            "{}",
            s.update_sql
        );
        assert!(s.read_customer_sql.ends_with("customer_id = $1::int8 AND \"created_at\" >= $2 ORDER BY \"created_at\" DESC LIMIT 20"));
        assert!(s.read_count_sql.ends_with("WHERE \"created_at\" >= $1"), "{}", s.read_count_sql);
        assert_eq!(s.defaulted, ["extra", "flag"]);
        let mut rng = SplitMix64::new(1);
        let v = s.insert_values(42, &mut rng);
        assert_eq!(v[0], "placed");
        assert_eq!(v[1], "42");
        assert!(v[2].parse::<f64>().is_ok());
        assert!(!v[3].is_empty() && v[3].len() <= 10, "{}", v[3]);
    }

    #[test]
    fn tables_the_operations_cannot_use_are_refused_with_the_reason() {
        let t = QualifiedName::new("public", "orders");
        let err = |cols: Vec<Column>, key: &str| Shape::build(t.clone(), key, &cols).unwrap_err().to_string();
        assert!(err(orders(), "placed_at").contains("no column \"placed_at\""));
        assert!(err(orders(), "customer_id").contains("needs a timestamptz or timestamp key"));
        let mut no_default = orders();
        no_default[0].has_default = false;
        assert!(err(no_default, "created_at").contains("id has no default"));
        let mut odd = orders();
        odd[7].not_null = true;
        assert!(err(odd, "created_at").contains("extra is point NOT NULL without a default"));
        let no_status: Vec<Column> = orders().into_iter().filter(|c| c.name != "status").collect();
        assert!(err(no_status, "created_at").contains("no column \"status\""));
    }

    #[test]
    fn times_are_postgres_microseconds() {
        let t = PgTime::from_unix_micros(PG_EPOCH_MICROS + 1_500_000);
        assert_eq!(t, PgTime(1_500_000));
        assert_eq!(t.minus_s(1.5), PgTime(0));
        assert_eq!(PgTime(0).to_string(), "2000-01-01T00:00:00Z");
    }

    #[test]
    fn statuses_follow_the_lifecycle() {
        assert_eq!((0..5).map(status_after).collect::<Vec<_>>(), ["placed", "paid", "shipped", "delivered", "delivered"]);
    }
}
