//! Compiles the wire messages with protox (a pure-Rust protobuf compiler), so building beacon
//! needs no system `protoc`: `proto/beacon.proto` (handshake, heartbeats, the consensus
//! core's log entries and snapshots, beacon status) and one file per replicated machine.

/// Machines' proto files, one line per machine.
const MACHINE_PROTOS: &[&str] = &[
    "registry.proto",
    "sequence.proto",
    "assign.proto",
    "tasks.proto",
];

/// Messages that nebcli and the admin HTTP API print as JSON.
const JSON_MESSAGES: &[&str] = &[
    "beacon.BeaconStatus",
    "beacon.BeaconEntry",
    "beacon.registry.NodeInfo",
    "beacon.registry.LoadStats",
    "beacon.registry.NodeEntry",
    "beacon.registry.NodesReply",
    "beacon.registry.IdsReply",
    "beacon.registry.Subscription",
    "beacon.registry.SubscriptionsReply",
    "beacon.sequence.SequenceInfo",
    "beacon.sequence.Segment",
    "beacon.sequence.SegmentReply",
    "beacon.sequence.SequenceReply",
    "beacon.sequence.SequencesReply",
    "beacon.assign.HolderInfo",
    "beacon.assign.ResourceInfo",
    "beacon.assign.ResourceReply",
    "beacon.assign.ResourcesReply",
    "beacon.assign.RebalanceReply",
    "beacon.assign.Move",
    "beacon.assign.SlotGroupInfo",
    "beacon.assign.SlotInfo",
    "beacon.assign.GroupView",
    "beacon.assign.GroupsReply",
    "beacon.assign.GroupReply",
    "beacon.tasks.QueueInfo",
    "beacon.tasks.QueueView",
    "beacon.tasks.QueuesReply",
    "beacon.tasks.QueueReply",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let files: Vec<&str> = std::iter::once("beacon.proto")
        .chain(MACHINE_PROTOS.iter().copied())
        .collect();
    let descriptors = protox::compile(files, ["proto"])?;
    let mut config = prost_build::Config::new();
    for name in JSON_MESSAGES {
        config.type_attribute(
            format!(".{name}"),
            "#[derive(serde::Serialize, serde::Deserialize)]",
        );
    }
    config.compile_fds(descriptors)?;
    Ok(())
}
