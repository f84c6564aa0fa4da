//! Chunks a service sends (`chute serve`'s requests): whole records, each
//! chunk with its own acknowledgement; the load runs until every sender of
//! the feed is gone. A feed has no identity of its own: it is journaled
//! only under a load id it is given.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::super::kind::{self, Prepared};
use super::super::source::{Feed, FeedSource};
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Delivery, Input, Opened, TextFormat};

/// What the chunks of a feed hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedFormat {
    /// Delimited text, as files hold it.
    Text(TextFormat),
    /// Rows of values the service parsed itself (`ValueRows`, one value a
    /// column of the load's columns): only encoded and routed.
    Values,
}

/// A service's feed into one table.
#[derive(Debug, Clone)]
pub struct FeedInput {
    feed: Feed,
    format: FeedFormat,
}

impl FeedInput {
    pub fn new(feed: Feed, format: FeedFormat) -> FeedInput {
        FeedInput { feed, format }
    }

    /// A feed opened: its chunks passed on as they come, answered for to
    /// their callers. For a service's own inputs over a feed, too.
    pub fn open_feed(feed: &Feed) -> Opened {
        Opened::new(Box::new(FeedSource { feed: feed.clone() }), Delivery::Callers, Arc::new(AtomicU64::new(0)))
    }
}

impl Input for FeedInput {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>> {
        match self.format {
            FeedFormat::Text(f) => kind::delimited::prepare(spec, f, (false, false), control, progress).boxed(),
            FeedFormat::Values => kind::values::prepare(spec, control, progress).boxed(),
        }
    }

    fn open(&self, _: &LoadSpec, _: &Prepared) -> Result<Opened, LoadError> {
        Ok(FeedInput::open_feed(&self.feed))
    }

    fn is_live(&self) -> bool {
        true
    }
}
