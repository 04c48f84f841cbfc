//! A Chrome trace of the pipeline's stages ([`PipelineBuilder::trace`]
//! (super::PipelineBuilder::trace)): one complete event (`"ph": "X"`) per sample read,
//! decoded and augmented and per batch waited for or submitted to the device, on the
//! thread that did it, in the JSON that Perfetto (ui.perfetto.dev) and `chrome://tracing`
//! open.
//!
//! Off by default; when off, each stage pays one `Option` test. When on, an event is a few
//! words in memory, and at most [`MAX_TRACE_EVENTS`] are kept (the later ones are counted
//! as dropped, and the count is written in the file's metadata). The file is written
//! again, whole, at the end of every epoch (a temporary file renamed over it), so a run
//! stopped part-way leaves the trace of its finished epochs. Written with `serde_json`
//! event by event, never as one string.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use serde::Serialize;

/// The most events one trace keeps (about 40 bytes each in memory, 130 in the file).
pub const MAX_TRACE_EVENTS: usize = 500_000;

/// One stage's span.
#[derive(Debug, Clone, Copy)]
struct Event {
    name: &'static str,
    tid: u32,
    start_ns: u64,
    dur_ns: u64,
    epoch: u64,
    /// The sample id or batch index ([`Event::name`] says which).
    id: Option<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    events: Vec<Event>,
    dropped: u64,
    threads: HashMap<ThreadId, u32>,
    names: Vec<String>,
}

/// The events of a traced pipeline, shared by its threads.
#[derive(Debug)]
pub(crate) struct Trace {
    path: PathBuf,
    start: Instant,
    inner: Mutex<Inner>,
}

/// Why a trace could not be written (logged, never an error of the epoch).
#[derive(Debug, thiserror::Error)]
#[error("cannot write the trace {path}: {source}")]
pub(crate) struct TraceError {
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

#[derive(Serialize)]
struct Complete<'a> {
    name: &'a str,
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    dur: f64,
    pid: u32,
    tid: u32,
    args: Args,
}

#[derive(Serialize)]
struct Args {
    epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    sample: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch: Option<u64>,
}

#[derive(Serialize)]
struct ThreadName<'a> {
    name: &'static str,
    ph: &'static str,
    pid: u32,
    tid: u32,
    args: NameArg<'a>,
}

#[derive(Serialize)]
struct NameArg<'a> {
    name: &'a str,
}

impl Trace {
    /// A trace to be written to `path`.
    pub(crate) fn new(path: &Path) -> Self {
        Trace {
            path: path.to_path_buf(),
            start: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Records a span of `name` that took `spent` and ended now, on this thread; `id` is
    /// the sample id (read, decode, augment) or the batch index (batch spans).
    pub(crate) fn span(&self, name: &'static str, spent: Duration, epoch: u64, id: Option<u64>) {
        let end = self.start.elapsed();
        let start_ns = end.saturating_sub(spent).as_nanos() as u64;
        let Ok(mut g) = self.inner.lock() else {
            return;
        };
        if g.events.len() >= MAX_TRACE_EVENTS {
            g.dropped += 1;
            return;
        }
        let me = std::thread::current();
        let next = g.threads.len() as u32 + 1;
        let tid = *g.threads.entry(me.id()).or_insert(next);
        if tid == next {
            let name = me.name().unwrap_or("stoker").to_string();
            g.names.push(name);
        }
        g.events.push(Event {
            name,
            tid,
            start_ns,
            dur_ns: spent.as_nanos() as u64,
            epoch,
            id,
        });
    }

    /// Writes every event so far to the trace's path.
    pub(crate) fn write(&self) -> Result<(), TraceError> {
        let err = |source| TraceError {
            path: self.path.clone(),
            source,
        };
        let (events, names, dropped) = match self.inner.lock() {
            Ok(g) => (g.events.clone(), g.names.clone(), g.dropped),
            Err(_) => return Ok(()),
        };
        let tmp = self.path.with_extension("json.partial");
        let file = std::fs::File::create(&tmp).map_err(err)?;
        let mut w = std::io::BufWriter::new(file);
        write_json(&mut w, &events, &names, dropped).map_err(err)?;
        w.flush().map_err(err)?;
        drop(w);
        std::fs::rename(&tmp, &self.path).map_err(err)
    }
}

fn write_json(
    w: &mut impl Write,
    events: &[Event],
    names: &[String],
    dropped: u64,
) -> std::io::Result<()> {
    write!(
        w,
        "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"dropped_events\":{dropped}}},"
    )?;
    w.write_all(b"\"traceEvents\":[")?;
    let mut first = true;
    let mut sep = |w: &mut dyn Write| -> std::io::Result<()> {
        if !std::mem::take(&mut first) {
            w.write_all(b",\n")?;
        }
        Ok(())
    };
    for (i, name) in names.iter().enumerate() {
        sep(w)?;
        let e = ThreadName {
            name: "thread_name",
            ph: "M",
            pid: 1,
            tid: i as u32 + 1,
            args: NameArg { name },
        };
        serde_json::to_writer(&mut *w, &e)?;
    }
    for e in events {
        sep(w)?;
        let per_batch = matches!(e.name, "wait for batch" | "device batch");
        let c = Complete {
            name: e.name,
            cat: "stage",
            ph: "X",
            ts: e.start_ns as f64 / 1e3,
            dur: e.dur_ns as f64 / 1e3,
            pid: 1,
            tid: e.tid,
            args: Args {
                epoch: e.epoch,
                sample: if per_batch { None } else { e.id },
                batch: if per_batch { e.id } else { None },
            },
        };
        serde_json::to_writer(&mut *w, &c)?;
    }
    w.write_all(b"]}\n")
}
