//! The standard gRPC services every beacon serves beside its own: health and reflection.
//!
//! Kept apart from the serving code so that the beacon's shared state can hold them without
//! importing the gRPC edge that uses that state.

use std::convert::Infallible;

use tower::util::BoxCloneSyncService;

/// The encoded descriptors of every message and service in `proto/`, for reflection.
pub(crate) const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

/// A boxed service as the router holds it.
pub(super) type Svc = BoxCloneSyncService<
    http::Request<hyper::body::Incoming>,
    http::Response<tonic::body::Body>,
    Infallible,
>;

/// The standard services beside beacon's own, made once per beacon.
pub(crate) struct Standard {
    pub(super) health: Svc,
    pub(super) reporter: tonic_health::server::HealthReporter,
    pub(super) reflection: Svc,
    pub(super) reflection_alpha: Svc,
}

impl Standard {
    pub(crate) fn new() -> Standard {
        let (reporter, health) = tonic_health::server::health_reporter();
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(DESCRIPTORS)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .expect("the descriptors built into beacon load");
        let reflection_alpha = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(DESCRIPTORS)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1alpha()
            .expect("the descriptors built into beacon load");
        Standard {
            health: BoxCloneSyncService::new(health),
            reporter,
            reflection: BoxCloneSyncService::new(reflection),
            reflection_alpha: BoxCloneSyncService::new(reflection_alpha),
        }
    }
}
