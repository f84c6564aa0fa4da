//! The maintainer never gets stuck: no table name can break the SQL it
//! runs.

use chute_testkit::shared;

use crate::common::{chute, run_expect};

/// A name holding the DO block's dollar quote or a RAISE `%` is only a name.
#[tokio::test]
async fn create_converts_a_table_whose_name_holds_a_dollar_quote_or_percent() {
    let db = shared().fresh_db("cli_partition_odd_name").await;
    let c = db.client().await;
    c.batch_execute(r#"CREATE TABLE "we$chute$ird%" (time timestamptz not null, v int)"#).await.unwrap();
    run_expect(chute().args(["--url", &db.url(), "partition", "create", "we$chute$ird%", "--key", "time", "--interval", "1d"]), 0);
    let kind: String = c.query_one(r#"SELECT relkind::text FROM pg_class WHERE relname = 'we$chute$ird%'"#, &[]).await.unwrap().get(0);
    assert_eq!(kind, "p", "the empty table became a partitioned parent");
}
