//! Function_graph recordings read as the kernel prints them: a call whose next record on
//! its CPU is its own return (same pid, same function) is one line, `func();` with the
//! duration, and that return is not printed again (trace_functions_graph.c
//! get_return_for_leaf); a return whose call was not shown names its function,
//! `} /* func */` (the kernel's per-CPU `enter_funcs`).
//!
//! [`Pairing`] sits between a stream of records merged by time and the renderer. A call is
//! held until the next record of its CPU arrives; records of other CPUs that come meanwhile
//! wait behind it, so the order is kept. Records pass through without a copy while nothing
//! is held.

use std::collections::{HashMap, VecDeque};

use crate::printfmt::GraphStep;
use crate::render::Renderer;

/// How many items may wait behind an undecided call before it is taken as a call with
/// children (a CPU silent for that long is not about to return from a leaf).
const MAX_WAITING: usize = 1 << 16;

/// The kernel remembers the function entered at depths below this (FTRACE_RETFUNC_DEPTH).
const RETFUNC_DEPTH: u64 = 50;

/// How a record prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Graph<'a> {
    /// As usual (a call with children prints `func() {`, a return `}`).
    Plain,
    /// This call had no children: one line with the duration its return (this) recorded.
    Leaf(&'a [u8]),
    /// A return whose call was not shown: `} /* func */`.
    Orphan,
}

/// What [`Pairing`] hands on, in the order it came in.
#[derive(Debug)]
pub enum Out<'a, O> {
    Event {
        cpu: u32,
        ts: u64,
        data: &'a [u8],
        graph: Graph<'a>,
    },
    /// Anything else in the stream (lost events, errors), passed on unchanged.
    Other(O),
}

enum State {
    /// A call whose CPU has had no record since.
    Open {
        func: u64,
        depth: u64,
        pid: i32,
    },
    Plain,
    Leaf(Vec<u8>),
    Orphan,
}

enum Waiting<O> {
    Event { cpu: u32, ts: u64, data: Vec<u8>, state: State },
    Other(O),
}

/// Pairs function_graph calls with their returns (see the module docs).
pub struct Pairing<O> {
    /// `funcgraph_entry` and `funcgraph_exit` IDs.
    ids: (u16, u16),
    waiting: VecDeque<Waiting<O>>,
    /// Items ever pushed to `waiting` before its front (positions stay valid as it drains).
    popped: u64,
    /// Per CPU: the position of its open call.
    open: HashMap<u32, u64>,
    /// Per CPU: the function entered at each depth and not yet returned from.
    entered: HashMap<u32, [u64; RETFUNC_DEPTH as usize]>,
}

impl<O> Pairing<O> {
    /// `None` when the trace has no function_graph events (nothing to pair).
    pub fn new(renderer: &Renderer) -> Option<Pairing<O>> {
        Some(Pairing {
            ids: renderer.graph_ids()?,
            waiting: VecDeque::new(),
            popped: 0,
            open: HashMap::new(),
            entered: HashMap::new(),
        })
    }

    /// A record of `cpu` whose common_type is `id`; everything decided is passed to `emit`.
    pub fn event<E>(
        &mut self,
        renderer: &Renderer,
        id: u16,
        cpu: u32,
        ts: u64,
        data: &[u8],
        emit: &mut impl FnMut(Out<'_, O>) -> Result<(), E>,
    ) -> Result<(), E> {
        let step =
            if id == self.ids.0 || id == self.ids.1 { renderer.graph_step(data) } else { None };
        // The usual case, every record of a trace without function_graph events: nothing
        // held (so no open call), nothing to pair.
        if step.is_none() && self.waiting.is_empty() {
            return emit(Out::Event { cpu, ts, data, graph: Graph::Plain });
        }
        let pid = renderer.common(data).map_or(0, |c| c.pid);
        if let Some((i, func, depth, call_pid)) = self.open_call(cpu) {
            match step {
                Some(GraphStep::Return { func: f, .. }) if f == func && pid == call_pid => {
                    self.open.remove(&cpu);
                    self.enter(cpu, depth, 0);
                    self.set(i, State::Leaf(data.to_vec()));
                    return self.flush(emit);
                }
                _ => self.close(cpu),
            }
        }
        let state = match step {
            Some(GraphStep::Call { func, depth }) => State::Open { func, depth, pid },
            Some(GraphStep::Return { func, depth }) => self.returned(cpu, depth, func),
            None => State::Plain,
        };
        if self.waiting.is_empty() {
            match state {
                State::Plain => return emit(Out::Event { cpu, ts, data, graph: Graph::Plain }),
                State::Orphan => return emit(Out::Event { cpu, ts, data, graph: Graph::Orphan }),
                _ => {}
            }
        }
        if matches!(state, State::Open { .. }) {
            self.open.insert(cpu, self.popped + self.waiting.len() as u64);
        }
        self.waiting.push_back(Waiting::Event { cpu, ts, data: data.to_vec(), state });
        self.flush(emit)
    }

    /// `cpu`'s open call: its index in `waiting`, function, depth and pid.
    fn open_call(&self, cpu: u32) -> Option<(usize, u64, u64, i32)> {
        let i = (*self.open.get(&cpu)? - self.popped) as usize;
        match self.waiting.get(i)? {
            Waiting::Event { state: State::Open { func, depth, pid }, .. } => {
                Some((i, *func, *depth, *pid))
            }
            _ => None,
        }
    }

    /// Anything that is not a record; `cpu` when it is about one CPU (lost events: the call
    /// open on that CPU cannot be known to be a leaf).
    pub fn other<E>(
        &mut self,
        cpu: Option<u32>,
        other: O,
        emit: &mut impl FnMut(Out<'_, O>) -> Result<(), E>,
    ) -> Result<(), E> {
        if let Some(cpu) = cpu {
            self.close(cpu);
        }
        if self.waiting.is_empty() {
            return emit(Out::Other(other));
        }
        self.waiting.push_back(Waiting::Other(other));
        self.flush(emit)
    }

    /// The end of the stream: open calls print as calls with children.
    pub fn finish<E>(
        &mut self,
        emit: &mut impl FnMut(Out<'_, O>) -> Result<(), E>,
    ) -> Result<(), E> {
        let cpus: Vec<u32> = self.open.keys().copied().collect();
        for cpu in cpus {
            self.close(cpu);
        }
        self.flush(emit)
    }

    /// Take `cpu`'s open call as a call with children: the kernel remembers it entered.
    fn close(&mut self, cpu: u32) {
        let Some((i, func, depth, _)) = self.open_call(cpu) else { return };
        self.open.remove(&cpu);
        self.enter(cpu, depth, func);
        self.set(i, State::Plain);
    }

    fn set(&mut self, i: usize, new: State) {
        if let Waiting::Event { state, .. } = &mut self.waiting[i] {
            *state = new;
        }
    }

    fn enter(&mut self, cpu: u32, depth: u64, func: u64) {
        if depth < RETFUNC_DEPTH {
            self.entered.entry(cpu).or_insert([0; RETFUNC_DEPTH as usize])[depth as usize] = func;
        }
    }

    /// A return: `Orphan` unless its call was shown at that depth on this CPU.
    fn returned(&mut self, cpu: u32, depth: u64, func: u64) -> State {
        if depth >= RETFUNC_DEPTH {
            return State::Plain;
        }
        let entered = self.entered.entry(cpu).or_insert([0; RETFUNC_DEPTH as usize]);
        let seen = entered[depth as usize] == func;
        entered[depth as usize] = 0;
        if seen {
            State::Plain
        } else {
            State::Orphan
        }
    }

    /// Pass on every decided item at the front.
    fn flush<E>(&mut self, emit: &mut impl FnMut(Out<'_, O>) -> Result<(), E>) -> Result<(), E> {
        if self.waiting.len() > MAX_WAITING {
            if let Some(Waiting::Event { cpu, state: State::Open { .. }, .. }) =
                self.waiting.front()
            {
                let cpu = *cpu;
                self.close(cpu);
            }
        }
        loop {
            match self.waiting.front() {
                Some(Waiting::Event { state: State::Open { .. }, .. }) | None => return Ok(()),
                _ => {}
            }
            let Some(item) = self.waiting.pop_front() else { return Ok(()) };
            self.popped += 1;
            match item {
                Waiting::Other(o) => emit(Out::Other(o))?,
                Waiting::Event { cpu, ts, data, state } => {
                    let graph = match &state {
                        State::Leaf(ret) => Graph::Leaf(ret),
                        State::Orphan => Graph::Orphan,
                        _ => Graph::Plain,
                    };
                    emit(Out::Event { cpu, ts, data: &data, graph })?;
                }
            }
        }
    }
}
