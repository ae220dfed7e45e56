//! Compiles `proto/beacon.proto` with protox (a pure-Rust protobuf compiler), so building
//! beacon needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(["beacon.proto"], ["proto"])?;
    prost_build::Config::new()
        // Status messages are printed as JSON by nebcli and the admin HTTP API.
        .type_attribute(
            ".beacon.BeaconStatus",
            "#[derive(serde::Serialize, serde::Deserialize)]",
        )
        .type_attribute(
            ".beacon.BeaconEntry",
            "#[derive(serde::Serialize, serde::Deserialize)]",
        )
        .compile_fds(descriptors)?;
    Ok(())
}
