//! The connection pool: deadpool's managed pool over chute's own way of
//! connecting (libpq's rules, TLS, passfiles), with the five statements
//! prepared once per connection.
//!
//! A connection that broke (a server restart, a dropped network) is not
//! handed out again: the next operation gets a new one. The server process
//! id of every connection is kept, so that at the end the sampler can wait
//! until each has exited, which is when PostgreSQL has flushed its
//! statistics.

use std::sync::{Arc, Mutex};

use chute_engine::ConnectOptions;
use deadpool::managed::{self, Metrics, RecycleError, RecycleResult};
use tokio_postgres::{Client, Statement};

use super::ops::{Kind, Shape};

/// One pooled connection and its prepared statements, by [`Kind::index`].
#[derive(Debug)]
pub struct Conn {
    pub client: Client,
    pub statements: Vec<Statement>,
}

/// Makes connections for the pool. `pids` collects the server process of
/// every connection ever made (the pool owns the connections; the sampler
/// reads the list once the pool is closed).
#[derive(Debug)]
pub struct Manager {
    pub options: ConnectOptions,
    pub shape: Arc<Shape>,
    pub pids: Arc<Mutex<Vec<i32>>>,
}

/// Why a connection could not be made, as text (the pool's error type).
#[derive(Debug, Clone)]
pub struct ConnFailure(pub String);

impl std::fmt::Display for ConnFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Pool = managed::Pool<Manager>;

impl managed::Manager for Manager {
    type Type = Conn;
    type Error = ConnFailure;

    async fn create(&self) -> Result<Conn, ConnFailure> {
        let client = self.options.connect().await.map_err(|e| ConnFailure(e.to_string()))?;
        let describe = |e: tokio_postgres::Error| ConnFailure(chute_engine::exec::describe(&e));
        // now() in a timestamp (without time zone) key is UTC, as the
        // simulator's own clock counts the ranges it reads.
        client.batch_execute("SET TimeZone = 'UTC'").await.map_err(describe)?;
        let pid: i32 = client.query_one("SELECT pg_backend_pid()", &[]).await.map_err(describe)?.get(0);
        self.pids.lock().expect("pid list").push(pid);
        let mut statements = Vec::with_capacity(Kind::ALL.len());
        for kind in Kind::ALL {
            let sql = match kind {
                Kind::Insert => &self.shape.insert_sql,
                Kind::Update => &self.shape.update_sql,
                Kind::ReadId => &self.shape.read_id_sql,
                Kind::ReadCustomer => &self.shape.read_customer_sql,
                Kind::ReadCount => &self.shape.read_count_sql,
            };
            statements.push(client.prepare(sql).await.map_err(describe)?);
        }
        Ok(Conn { client, statements })
    }

    async fn recycle(&self, conn: &mut Conn, _: &Metrics) -> RecycleResult<ConnFailure> {
        if conn.client.is_closed() { Err(RecycleError::message("the connection was closed")) } else { Ok(()) }
    }
}
