//! The Perfetto trace messages `schedlab trace` writes, declared for
//! `prost` with the field numbers and types of Perfetto's own `.proto`
//! files (`protos/perfetto/trace/`: `trace.proto`, `trace_packet.proto`,
//! `ftrace/ftrace_event_bundle.proto`, `ftrace/ftrace_event.proto`,
//! `ftrace/sched.proto`, `ftrace/ipi.proto`, `ps/process_tree.proto`,
//! `track_event/{track_descriptor, process_descriptor, thread_descriptor,
//! counter_descriptor, track_event, debug_annotation}.proto`), only the
//! fields we set.
//!
//! Why not the generated `perfetto_protos` crate: it is every Perfetto
//! message, and compiling it (and `protobuf`) was most of a first build,
//! twice (release and test profiles). A field Perfetto declares that is
//! not here is simply never written; a reader skips what it does not know.
//! The writer's bytes were checked equal to the generated crate's for the
//! same runs when this module replaced it, and a fixture keeps them so
//! (`tests/all/trace.rs`).

// The derive writes the accessors; the names are Perfetto's.
#![allow(clippy::derive_partial_eq_without_eq)]

use prost::{Message, Oneof};

/// `perfetto.protos.Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket`.
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    #[prost(oneof = "Data", tags = "1, 2, 11, 60, 67")]
    pub data: Option<Data>,
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
}

/// `TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

/// `TracePacket`'s `oneof data` (the kinds we write).
#[derive(Clone, PartialEq, Oneof)]
pub enum Data {
    #[prost(message, tag = "1")]
    FtraceEvents(FtraceEventBundle),
    #[prost(message, tag = "2")]
    ProcessTree(ProcessTree),
    #[prost(message, tag = "11")]
    TrackEvent(TrackEvent),
    #[prost(message, tag = "60")]
    TrackDescriptor(TrackDescriptor),
    /// Read, never written.
    #[prost(message, tag = "67")]
    CpuInfo(CpuInfo),
}

/// `perfetto.protos.CpuInfo`: the machine's CPUs (read, never written).
#[derive(Clone, PartialEq, Message)]
pub struct CpuInfo {
    #[prost(message, repeated, tag = "1")]
    pub cpus: Vec<CpuInfoCpu>,
}

/// `CpuInfo.Cpu`.
#[derive(Clone, PartialEq, Message)]
pub struct CpuInfoCpu {
    #[prost(string, optional, tag = "1")]
    pub processor: Option<String>,
}

/// `perfetto.protos.FtraceEventBundle`.
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEventBundle {
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
    /// The kernel lost events before this bundle (read, never written).
    #[prost(bool, optional, tag = "3")]
    pub lost_events: Option<bool>,
    /// The compact encoding of switches and wakings (read, never written).
    #[prost(message, optional, tag = "4")]
    pub compact_sched: Option<CompactSched>,
}

/// `FtraceEventBundle.CompactSched`: `sched_switch` and `sched_waking` as
/// columns, timestamps delta-encoded from 0 within the bundle, command
/// names interned; a switch's previous task is the CPU's last next task,
/// a waking's waker the CPU's current task (Perfetto's
/// `ftrace_tokenizer.cc`, `TokenizeFtraceCompactSched*`).
#[derive(Clone, PartialEq, Message)]
pub struct CompactSched {
    #[prost(string, repeated, tag = "5")]
    pub intern_table: Vec<String>,
    #[prost(uint64, repeated, packed = "true", tag = "1")]
    pub switch_timestamp: Vec<u64>,
    #[prost(int64, repeated, packed = "true", tag = "2")]
    pub switch_prev_state: Vec<i64>,
    #[prost(int32, repeated, packed = "true", tag = "3")]
    pub switch_next_pid: Vec<i32>,
    #[prost(int32, repeated, packed = "true", tag = "4")]
    pub switch_next_prio: Vec<i32>,
    #[prost(uint32, repeated, packed = "true", tag = "6")]
    pub switch_next_comm_index: Vec<u32>,
    #[prost(uint64, repeated, packed = "true", tag = "7")]
    pub waking_timestamp: Vec<u64>,
    #[prost(int32, repeated, packed = "true", tag = "8")]
    pub waking_pid: Vec<i32>,
    #[prost(int32, repeated, packed = "true", tag = "9")]
    pub waking_target_cpu: Vec<i32>,
    #[prost(int32, repeated, packed = "true", tag = "10")]
    pub waking_prio: Vec<i32>,
    #[prost(uint32, repeated, packed = "true", tag = "11")]
    pub waking_comm_index: Vec<u32>,
    #[prost(uint32, repeated, packed = "true", tag = "12")]
    pub waking_common_flags: Vec<u32>,
}

/// `perfetto.protos.FtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEvent {
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    #[prost(oneof = "Ftrace", tags = "4, 17, 20, 23, 114, 235, 238, 240, 491")]
    pub event: Option<Ftrace>,
    /// Read, never written.
    #[prost(uint32, optional, tag = "5")]
    pub common_flags: Option<u32>,
}

/// `FtraceEvent`'s `oneof event` (the kinds we write).
#[derive(Clone, PartialEq, Oneof)]
pub enum Ftrace {
    #[prost(message, tag = "4")]
    SchedSwitch(SchedSwitchFtraceEvent),
    #[prost(message, tag = "20")]
    SchedWaking(SchedWakingFtraceEvent),
    #[prost(message, tag = "23")]
    IpiRaise(IpiRaiseFtraceEvent),
    // Read, never written: the rest of a scheduler trace.
    #[prost(message, tag = "17")]
    SchedWakeup(SchedWakingFtraceEvent),
    #[prost(message, tag = "114")]
    SchedWakeupNew(SchedWakingFtraceEvent),
    #[prost(message, tag = "235")]
    TaskNewtask(TaskNewtaskFtraceEvent),
    #[prost(message, tag = "238")]
    SchedProcessExit(SchedProcessExitFtraceEvent),
    #[prost(message, tag = "240")]
    SchedProcessFree(SchedProcessExitFtraceEvent),
    #[prost(message, tag = "491")]
    SchedMigrateTask(SchedMigrateTaskFtraceEvent),
}

/// `perfetto.protos.TaskNewtaskFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TaskNewtaskFtraceEvent {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub comm: Option<String>,
    #[prost(uint64, optional, tag = "3")]
    pub clone_flags: Option<u64>,
}

/// `perfetto.protos.SchedProcessExitFtraceEvent` (and `...Free`'s first
/// two fields, the same).
#[derive(Clone, PartialEq, Message)]
pub struct SchedProcessExitFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
}

/// `perfetto.protos.SchedMigrateTaskFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedMigrateTaskFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub orig_cpu: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub dest_cpu: Option<i32>,
}

/// `perfetto.protos.SchedSwitchFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedSwitchFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// `perfetto.protos.SchedWakingFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedWakingFtraceEvent {
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// `perfetto.protos.IpiRaiseFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct IpiRaiseFtraceEvent {
    #[prost(uint32, optional, tag = "1")]
    pub target_cpus: Option<u32>,
    #[prost(string, optional, tag = "2")]
    pub reason: Option<String>,
}

/// `perfetto.protos.ProcessTree`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessTree {
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<Process>,
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<Thread>,
}

/// `perfetto.protos.ProcessTree.Process`.
#[derive(Clone, PartialEq, Message)]
pub struct Process {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
}

/// `perfetto.protos.ProcessTree.Thread`.
#[derive(Clone, PartialEq, Message)]
pub struct Thread {
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.CounterDescriptor` (defaults: a plain counter).
#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {}

/// `perfetto.protos.TrackEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(enumeration = "Type", optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `perfetto.protos.TrackEvent.Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum Type {
    Unspecified = 0,
    SliceBegin = 1,
    SliceEnd = 2,
    Instant = 3,
    Counter = 4,
}

/// `perfetto.protos.DebugAnnotation` (a named integer).
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wire bytes worked by hand from Perfetto's `.proto` field numbers
    /// (key = number << 3 | wire type) decode to the fields we name, and
    /// what we encode decodes back to the same message.
    #[test]
    fn hand_encoded_packets_decode_to_the_named_fields() {
        // TracePacket { timestamp(8) = 5, trusted_packet_sequence_id(10) =
        // 1, track_event(11) = { type(9) = INSTANT 3, track_uuid(11) = 7,
        // flow_ids(47, fixed64, unpacked) = [2] } }.
        let instant = [
            64, 5, 80, 1, 90, 14, 72, 3, 88, 7, 249, 2, 2, 0, 0, 0, 0, 0, 0, 0,
        ];
        let p = TracePacket::decode(&instant[..]).expect("decodes");
        assert_eq!((p.timestamp(), p.trusted_packet_sequence_id()), (5, 1));
        let Some(Data::TrackEvent(e)) = &p.data else {
            panic!("a track event, got {:?}", p.data)
        };
        assert_eq!(e.r#type(), Type::Instant);
        assert_eq!((e.track_uuid(), e.flow_ids.as_slice()), (7, &[2u64][..]));
        // TracePacket { ftrace_events(1) = { cpu(1) = 2, event(2) = {
        // timestamp(1) = 100, pid(2) = 3, sched_switch(4) = { prev_pid(2) =
        // 3, prev_state(4) = 1, next_pid(6) = 0 } } } }.
        let switch = [
            10, 16, 8, 2, 18, 12, 8, 100, 16, 3, 34, 6, 16, 3, 32, 1, 48, 0,
        ];
        let p = TracePacket::decode(&switch[..]).expect("decodes");
        let Some(Data::FtraceEvents(b)) = &p.data else {
            panic!("an ftrace bundle, got {:?}", p.data)
        };
        assert_eq!((b.cpu(), b.event.len()), (2, 1));
        let e = &b.event[0];
        assert_eq!((e.timestamp(), e.pid()), (100, 3));
        let Some(Ftrace::SchedSwitch(s)) = &e.event else {
            panic!("a sched_switch, got {:?}", e.event)
        };
        assert_eq!((s.prev_pid(), s.prev_state(), s.next_pid()), (3, 1, 0));
        for bytes in [&instant[..], &switch[..]] {
            let p = TracePacket::decode(bytes).unwrap();
            let again = TracePacket::decode(p.encode_to_vec().as_slice()).unwrap();
            assert_eq!(again, p, "encode then decode is the same packet");
        }
    }
}
