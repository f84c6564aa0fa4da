//! The fixture itself: it reaches a real server and isolates tests.

use chute_testkit::shared;

#[tokio::test]
async fn a_value_makes_a_round_trip_through_a_real_table() {
    let db = shared().fresh_db("round_trip").await;
    let client = db.client().await;
    client.batch_execute("CREATE TABLE t (id int primary key, note text)").await.unwrap();
    client.execute("INSERT INTO t VALUES ($1, $2)", &[&7i32, &"seven"]).await.unwrap();
    let row = client.query_one("SELECT note, version() FROM t WHERE id = 7", &[]).await.unwrap();
    assert_eq!(row.get::<_, &str>(0), "seven");
    assert!(row.get::<_, &str>(1).starts_with("PostgreSQL "), "not a PostgreSQL server: {}", row.get::<_, &str>(1));
}

#[tokio::test]
async fn each_test_gets_its_own_database() {
    let a = shared().fresh_db("iso").await;
    let b = shared().fresh_db("iso").await;
    assert_ne!(a.name, b.name);
    a.client().await.batch_execute("CREATE TABLE only_in_a (x int)").await.unwrap();
    let n: i64 = b.client().await.query_one("SELECT count(*) FROM pg_class WHERE relname = 'only_in_a'", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
}

#[test]
fn an_owned_cluster_stops_and_disappears_when_dropped() {
    let c = chute_testkit::TestCluster::start();
    let pid = c.cluster.running_pid().expect("the server should run");
    let dir = c.cluster.data_dir.clone();
    drop(c);
    assert!(!chute_engine::local::process_alive(pid), "postmaster {pid} still alive");
    assert!(!dir.exists());
}

#[tokio::test]
async fn a_database_is_dropped_with_its_last_clone_sessions_and_all() {
    let admin = shared().options("postgres").connect().await.unwrap();
    let db = shared().fresh_db("dropped").await;
    let name = db.name.clone();
    let exists = || async {
        let n: i64 = admin.query_one("SELECT count(*) FROM pg_database WHERE datname = $1", &[&name]).await.unwrap().get(0);
        n == 1
    };
    let session = db.client().await;
    let clone = db.clone();
    drop(db);
    assert!(exists().await, "a clone still uses {name}");
    drop(clone);
    assert!(!exists().await, "{name} is dropped with its last clone");
    assert!(session.simple_query("SELECT 1").await.is_err(), "the session still in it was ended");
}
