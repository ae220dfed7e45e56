//! Compiles `proto/beacon.proto` with protox (a pure-Rust protobuf compiler), so building
//! beacon needs no system `protoc`.

/// Messages that nebcli and the admin HTTP API print as JSON.
const JSON_MESSAGES: &[&str] = &[
    "BeaconStatus",
    "BeaconEntry",
    "NodeInfo",
    "LoadStats",
    "NodeEntry",
    "NodesReply",
    "IdsReply",
    "Subscription",
    "SubscriptionsReply",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(["beacon.proto"], ["proto"])?;
    let mut config = prost_build::Config::new();
    for name in JSON_MESSAGES {
        config.type_attribute(
            format!(".beacon.{name}"),
            "#[derive(serde::Serialize, serde::Deserialize)]",
        );
    }
    config.compile_fds(descriptors)?;
    Ok(())
}
