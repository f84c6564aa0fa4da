//! Black-box tests of the `chute` binary against real servers.

#[path = "cli/common.rs"]
mod common;

#[path = "cli/acks.rs"]
mod acks;
#[path = "cli/backfill.rs"]
mod backfill;
#[path = "cli/backfill_swap.rs"]
mod backfill_swap;
#[path = "cli/basics.rs"]
mod basics;
#[path = "cli/bench.rs"]
mod bench;
#[path = "cli/bench_report.rs"]
mod bench_report;
#[path = "cli/cluster.rs"]
mod cluster;
#[path = "cli/columnar.rs"]
mod columnar;
#[path = "cli/conninfo.rs"]
mod conninfo;
#[path = "cli/consume.rs"]
mod consume;
#[path = "cli/consume_edges.rs"]
mod consume_edges;
#[path = "cli/consume_failover.rs"]
mod consume_failover;
#[path = "cli/consume_replicated.rs"]
mod consume_replicated;
#[path = "cli/demo.rs"]
mod demo;
#[path = "cli/disk_full.rs"]
mod disk_full;
#[path = "cli/docs_links.rs"]
mod docs_links;
#[path = "cli/doctor.rs"]
mod doctor;
#[path = "cli/exactly_once.rs"]
mod exactly_once;
#[path = "cli/failover.rs"]
mod failover;
#[path = "cli/failover_schema.rs"]
mod failover_schema;
#[path = "cli/first_use.rs"]
mod first_use;
#[path = "cli/gen.rs"]
mod r#gen;
#[path = "cli/layout.rs"]
mod layout;
#[path = "cli/load.rs"]
mod load;
#[path = "cli/local.rs"]
mod local;
#[path = "cli/maintainer.rs"]
mod maintainer;
#[path = "cli/migrate.rs"]
mod migrate;
#[path = "cli/migrate_columns.rs"]
mod migrate_columns;
#[path = "cli/migrate_early.rs"]
mod migrate_early;
#[path = "cli/migrate_keys.rs"]
mod migrate_keys;
#[path = "cli/migrate_live.rs"]
mod migrate_live;
#[path = "cli/migrate_status.rs"]
mod migrate_status;
#[path = "cli/partition.rs"]
mod partition;
#[path = "cli/pooler.rs"]
mod pooler;
#[path = "cli/privileges.rs"]
mod privileges;
#[path = "cli/python.rs"]
mod python;
#[path = "cli/readme.rs"]
mod readme;
#[path = "cli/readme_tls.rs"]
mod readme_tls;
#[path = "cli/rejects_exact.rs"]
mod rejects_exact;
#[path = "cli/reliability.rs"]
mod reliability;
#[path = "cli/retry_everywhere.rs"]
mod retry_everywhere;
#[path = "cli/role_timeouts.rs"]
mod role_timeouts;
#[path = "cli/route_values.rs"]
mod route_values;
#[path = "cli/routing.rs"]
mod routing;
#[path = "cli/serve.rs"]
mod serve;
#[path = "cli/serve_clients.rs"]
mod serve_clients;
#[path = "cli/serve_failover.rs"]
mod serve_failover;
#[path = "cli/serve_guard.rs"]
mod serve_guard;
#[path = "cli/serve_hostile.rs"]
mod serve_hostile;
#[path = "cli/serve_instances.rs"]
mod serve_instances;
#[path = "cli/serve_lanes.rs"]
mod serve_lanes;
#[path = "cli/serve_limits.rs"]
mod serve_limits;
#[path = "cli/serve_once.rs"]
mod serve_once;
#[path = "cli/serve_otlp.rs"]
mod serve_otlp;
#[path = "cli/serve_prometheus.rs"]
mod serve_prometheus;
#[path = "cli/serve_prometheus_holes.rs"]
mod serve_prometheus_holes;
#[path = "cli/serve_prometheus_real.rs"]
mod serve_prometheus_real;
#[path = "cli/serve_refusals.rs"]
mod serve_refusals;
#[path = "cli/serve_soak.rs"]
mod serve_soak;
#[path = "cli/serve_values.rs"]
mod serve_values;
#[path = "cli/settings.rs"]
mod settings;
#[path = "cli/setup_scripts.rs"]
mod setup_scripts;
#[path = "cli/simulate.rs"]
mod simulate;
#[path = "cli/tsbs.rs"]
mod tsbs;
#[path = "cli/tsbs_existing.rs"]
mod tsbs_existing;
#[path = "cli/upsert.rs"]
mod upsert;
