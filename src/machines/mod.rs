//! The replicated machines, and the list that composes them into what beacon replicates.
//!
//! A machine is one folder: its state and commands (`state.rs`, a [`Machine`]), its
//! leader-side service (`service.rs`, a [`Service`]), its configuration section
//! (`config.rs`, a [`Configurable`] section), its wire part (`wire.rs`: its own proto file,
//! its command codes, its part of log entries, snapshots and heartbeats), its server
//! handlers and admin views (`rpc.rs`, [`Served`]), its gauges (`metrics.rs`,
//! [`Measured`]), its client API (`client/`), its nebcli commands (`cli/`, a
//! [`crate::cli::Commands`] set) and its workload and invariants for the simulations
//! (`checker.rs`, a [`crate::sim::Workload`]). The consensus core names no machine: it is
//! generic over the composite that [`compose!`](crate::compose) builds from one line per
//! machine, and the server reaches the machines only through what `compose!` generates
//! ([`Dispatch`], [`Sections`], `State::gauges`, [`clients`]). [`handle`] is what a handler
//! may do: the driver's channel, the answer it gives, the refusal it sends instead.
//!
//! Ranges each machine owns, so that their parts merge into the shared messages:
//!
//! | machine | command codes | `LogEntry` | `Snapshot` | `Election` | `Hello` | error codes |
//! |---|---|---|---|---|---|---|
//! | core | 1-14, 113-114, 301-302 | 1-2, 8 | 1-2 | 1, 5-21 | 1-5, 8-11 | 1-11, 16-18, 20-21 |
//! | registry | 101-122, 303-308 | 3-7 | 3-5 | 2-4 | 6-7 | 12-15, 19, 22 |
//! | sequence | 401-412 | 20-23 | 20 | - | - | 30-34 |
//! | assign | 501-526 | 30-37 | 30-31 | - | - | 40-48 |
//! | tasks | 601-632 | 40-48 | 40-42 | - | - | 50-57 |
//! | configs | 701-709 | 50 | 50 | - | - | 60-62 |
//! | (next) | 801-899 | 60-69 | 60-69 | 50-59 | 20-29 | 70-79 |
//!
//! Adding a machine: its folder, its proto file in `proto/` (compiled and placed in
//! [`crate::pb`] by `build.rs` without a line), one line in the list below, and one in
//! nebcli's command table (`nebcli/src/commands.rs`). `tests/tidy.rs` keeps it so.
//! `sims/tests/sims/counter/` is a small example, composed in
//! `sims/tests/sims/counter_machine.rs`.

pub mod assign;
pub mod bulk;
pub mod configs;
pub(crate) mod follow;
pub mod handle;
pub mod registry;
pub mod sequence;
pub mod tasks;
pub(crate) mod view;
pub mod watchers;

pub use crate::consensus::{Machine, Service};

/// A composite state that holds machine `M`: a service of `M` reads its part and appends its
/// commands through the composite, so the same service serves any composite holding `M`.
pub trait Part<M: Machine>: Machine {
    /// `M`'s part of the composite ([`Machine::part`]): what a read of `M` alone waits for.
    const INDEX: usize;
    fn part(&self) -> &M;
    fn wrap(command: M::Command) -> Self::Command;
    /// `M`'s change, if `change` is one.
    fn change(change: &Self::Change) -> Option<&M::Change>;
}

/// A machine alone is a composite of one.
impl<M: Machine> Part<M> for M {
    const INDEX: usize = 0;
    fn part(&self) -> &M {
        self
    }
    fn wrap(command: M::Command) -> M::Command {
        command
    }
    fn change(change: &M::Change) -> Option<&M::Change> {
        Some(change)
    }
}

/// A composite service over state `S` that routes to service `V`: requests to `V` go in
/// wrapped, and `V`'s answers come out unwrapped (`None` for another machine's, a bug).
pub trait Routes<S: Machine, V: Service<S>>: Service<S> {
    fn service(&self) -> &V;
    fn request(request: V::Request) -> Self::Request;
    fn response(response: Self::Response) -> Option<V::Response>;
    fn error(error: Self::Error) -> Option<V::Error>;
}

/// One sample of a gauge a machine shows on `/metrics`: its name after the `beacon_`
/// prefix, its help, its labels (of bounded cardinality: names an admin created, states)
/// and its value.
#[derive(Debug, Clone, PartialEq)]
pub struct GaugeSample {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// What a machine shows on `/metrics`, read from the composite state `S` (and its own
/// section of the configuration) when a scrape asks, so it is exact at that moment and costs
/// nothing between scrapes. A machine with nothing to show leaves the default.
pub trait Measured<S>: Configurable {
    fn gauges(_state: &S, _section: &Self::Section, _wall_ms: u64, _out: &mut Vec<GaugeSample>) {}
}

/// A machine's part of the configuration: its [`Section`](crate::settings::Section), parsed
/// and checked in its folder (`config.rs`).
pub trait Configurable {
    type Section: crate::settings::Section;
}

/// A machine's request codes, as its `wire.rs` declares them, with what [`Served`] routes,
/// names and authorizes them by: each code's role and whether it is batched.
pub trait Commands: Copy + std::fmt::Debug {
    /// The command of code `code`, if this machine owns it.
    fn from_code(code: u32) -> Option<Self>;
    /// The role a client needs to send it (when authentication is on).
    fn role(self) -> crate::auth::Role;
    /// Whether requests of it queued back to back go to the driver together.
    fn batches(self) -> bool {
        false
    }
}

/// The request codes of a machine that serves none (a test's).
#[derive(Debug, Clone, Copy)]
pub enum NoCommands {}

impl Commands for NoCommands {
    fn from_code(_code: u32) -> Option<Self> {
        None
    }
    fn role(self) -> crate::auth::Role {
        match self {}
    }
}

/// An instance a DNS name stands for: its address, and the name below beacon's zone that
/// names it alone (`12.node`), the target of its `SRV` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsInstance {
    pub name: String,
    pub addr: std::net::SocketAddr,
}

/// How a beacon serves a machine's requests over the wire (its `rpc.rs`): the command codes
/// it owns ([`Served::Cmd`], from which the role each needs, its name and whether it may be
/// batched follow), its handlers, and its part of the peers' handshake. A machine that is
/// not served (a test's) names [`NoCommands`] and keeps the defaults, which own nothing.
pub trait Served: Configurable {
    /// Its request codes (its `wire.rs`); [`NoCommands`] for a machine that serves none.
    type Cmd: Commands;
    /// Whether this machine owns request code `cmd`.
    fn owns(cmd: u32) -> bool {
        Self::Cmd::from_code(cmd).is_some()
    }
    /// The role a client needs to send `cmd` (when authentication is on).
    fn role(cmd: u32) -> Option<crate::auth::Role> {
        Self::Cmd::from_code(cmd).map(Commands::role)
    }
    /// The name of request `cmd` (a metric's label, a refusal's words).
    fn name(cmd: u32) -> Option<String> {
        Self::Cmd::from_code(cmd).map(|c| format!("{c:?}"))
    }
    /// Whether requests `cmd` queued back to back go to the driver together.
    fn batches(cmd: u32) -> bool {
        Self::Cmd::from_code(cmd).is_some_and(Commands::batches)
    }
    /// Serves `frames`, requests of one code this machine [batches](Served::batches) that
    /// arrived together, answering each in order. By default one after the other; a machine
    /// overrides it to hand them to the driver together.
    fn serve_batch<'a>(
        frames: &'a [crate::wire::Frame],
        ctx: &'a handle::Ctx<'a>,
    ) -> impl Future<Output = Vec<Result<handle::Handled, handle::Reject>>> + Send + 'a {
        async move {
            let mut out = Vec::with_capacity(frames.len());
            for frame in frames {
                out.push(Self::serve(frame, ctx).await);
            }
            out
        }
    }
    /// Serves `frame` (a code this machine owns).
    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        _ctx: &'a handle::Ctx<'a>,
    ) -> impl Future<Output = Result<handle::Handled, handle::Reject>> + Send + 'a {
        let cmd = frame.cmd;
        async move {
            Err(handle::Reject::new(
                crate::wire::ErrorCode::UnknownCommand,
                format!("cmd {cmd} is not served"),
            ))
        }
    }
    /// Its JSON views on the admin HTTP API (the status page reads them).
    fn views() -> Vec<handle::AdminView> {
        Vec::new()
    }
    /// Its gRPC service (its `grpc.rs`), if it has one.
    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        None
    }
    /// The instances DNS name `labels` (below beacon's zone, as asked: `["Web",
    /// "service"]` for `Web.service.beacon.`) stands for in this state, if this machine
    /// knows the name: DNS is an edge that answers from the replica and names no machine.
    fn dns(&self, _labels: &[String]) -> Option<Vec<DnsInstance>> {
        None
    }
    /// What registration `node` (its node ID and fencing token) holds in this state, one
    /// line per thing (`resource site-1`, `slot robots/0`, `task q/k`): a drain is done
    /// when no machine names anything.
    fn held_by(&self, _node: (u32, crate::machines::registry::FencingToken)) -> Vec<String> {
        Vec::new()
    }
    /// The cluster's replicated allowlist ([`crate::allow`]), when this machine keeps it
    /// and it is set: it then replaces each beacon's configured `ip_allow`.
    fn allowlist(&self) -> Option<&std::sync::Arc<crate::allow::Allowlist>> {
        None
    }
    /// Adds what beacons of one cluster must agree on to our `Hello` to a peer.
    fn hello_fields(_section: &Self::Section, _buf: &mut Vec<u8>) {}
    /// Checks a peer's `Hello` (the whole message) for what this machine needs agreed.
    fn check_hello(
        _section: &Self::Section,
        _peer: std::net::SocketAddr,
        _hello: &[u8],
    ) -> Result<(), handle::Reject> {
        Ok(())
    }
}

/// Built from a machine's section of the configuration: its empty state, or its service.
pub trait Configured<C> {
    fn configured(section: &C) -> Self;
}

/// A broken service of the simulations is configured as the service it breaks.
impl<C, V: Configured<C>, F: Default> Configured<C> for crate::sim::Broken<V, F> {
    fn configured(section: &C) -> Self {
        crate::sim::Broken {
            service: V::configured(section),
            fault: F::default(),
        }
    }
}

/// Composes machines and their services into one replicated state and one service, in the
/// calling module: `State`, `Command`, `Change`, `Snapshot`, `ApplyError` (the [`Machine`]),
/// `Services`, `Request`, `Response`, `Error`, `Waiting` (the [`Service`]), and their wire
/// codec. One line per machine: `field: Variant => MachineType, ServiceType;`.
#[macro_export]
macro_rules! compose {
    // Beacon's own list: every field names the machine's module too, whose `client` API is
    // put in one place (`clients`) for `crate::client`.
    (with clients; $( $field:ident : $Variant:ident => $M:ty, $V:ty; )+) => {
        $crate::compose!( $( $field : $Variant => $M, $V; )+ );

        /// Every machine's client API (its `client` module), for `beacon::client` to put in
        /// one place.
        pub mod clients {
            $( pub use super::$field::client::*; )+
        }
    };
    ($( $field:ident : $Variant:ident => $M:ty, $V:ty; )+) => {
        /// The replicated state: every machine's.
        #[derive(Debug, Clone)]
        pub struct State {
            $( pub $field: $M, )+
        }

        /// A command of one of the machines, boxed: the log keeps about as many entries as
        /// the state has records, and inline every entry would be as large as the largest
        /// command of any machine (a task, a queue's spec), hundreds of bytes for a
        /// registration that needs a pointer to the record it shares with the state.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Command {
            $( $Variant(Box<<$M as $crate::consensus::Machine>::Command>), )+
        }

        /// The machines, in order: each is a part of the state ([`Machine::part`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Machines {
            $( $Variant, )+
        }

        impl Machines {
            /// Every machine, in order: the one of part `i` is `ALL[i]`.
            pub const ALL: &'static [Machines] = &[$( Machines::$Variant, )+];

            /// The machine's name, as beacons tell each other how far to read it.
            pub fn name(self) -> &'static str {
                match self {
                    $( Machines::$Variant => stringify!($field), )+
                }
            }
        }

        /// What a command changed.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Change {
            $( $Variant(<$M as $crate::consensus::Machine>::Change), )+
        }

        /// Every machine's snapshot.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Snapshot {
            $( pub $field: <$M as $crate::consensus::Machine>::Snapshot, )+
        }

        /// A command that did not fit its machine.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ApplyError {
            $( $Variant(<$M as $crate::consensus::Machine>::ApplyError), )+
        }

        impl std::fmt::Display for ApplyError {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( ApplyError::$Variant(e) => std::fmt::Display::fmt(e, f), )+
                }
            }
        }

        impl std::error::Error for ApplyError {}

        impl $crate::consensus::Machine for State {
            type Command = Command;
            type Change = Change;
            type Snapshot = Snapshot;
            type ApplyError = ApplyError;

            fn apply(
                &mut self,
                command: &Command,
                now: $crate::time::Millis,
            ) -> Result<Option<Change>, ApplyError> {
                match command {
                    $( Command::$Variant(c) =>
                        <$M as $crate::consensus::Machine>::apply(&mut self.$field, c, now)
                            .map(|change| change.map(Change::$Variant))
                            .map_err(ApplyError::$Variant), )+
                }
            }

            const PARTS: usize = Machines::ALL.len();

            fn part(command: &Command) -> usize {
                match command {
                    $( Command::$Variant(_) => Machines::$Variant as usize, )+
                }
            }

            fn change_bytes(change: &Change) -> usize {
                match change {
                    $( Change::$Variant(c) =>
                        <$M as $crate::consensus::Machine>::change_bytes(c), )+
                }
            }

            fn snapshot(&self, now: $crate::time::Millis) -> Snapshot {
                Snapshot {
                    $( $field: <$M as $crate::consensus::Machine>::snapshot(&self.$field, now), )+
                }
            }

            fn restore(&mut self, snapshot: Snapshot, now: $crate::time::Millis) {
                $( <$M as $crate::consensus::Machine>::restore(&mut self.$field, snapshot.$field, now); )+
            }

            fn records(&self) -> usize {
                0 $( + <$M as $crate::consensus::Machine>::records(&self.$field) )+
            }

            fn summary(&self) -> String {
                let parts: Vec<String> = vec![
                    $( <$M as $crate::consensus::Machine>::summary(&self.$field), )+
                ];
                parts.join(", ")
            }

            fn restored(&mut self) -> Result<(), String> {
                $( <$M as $crate::consensus::Machine>::restored(&mut self.$field)?; )+
                Ok(())
            }
        }

        $(
            impl $crate::machines::Part<$M> for State {
                const INDEX: usize = Machines::$Variant as usize;
                fn part(&self) -> &$M {
                    &self.$field
                }
                fn wrap(command: <$M as $crate::consensus::Machine>::Command) -> Command {
                    Command::$Variant(Box::new(command))
                }
                fn change(change: &Change) -> Option<&<$M as $crate::consensus::Machine>::Change> {
                    match change {
                        Change::$Variant(c) => Some(c),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        )+

        impl $crate::wire::MachineWire for State {
            fn encode_command(command: &Command, buf: &mut Vec<u8>) {
                match command {
                    $( Command::$Variant(c) => <$M as $crate::wire::MachineWire>::encode_command(c, buf), )+
                }
            }

            fn decode_command(entry: &[u8]) -> Result<Option<Command>, $crate::wire::WireError> {
                $(
                    if let Some(c) = <$M as $crate::wire::MachineWire>::decode_command(entry)? {
                        return Ok(Some(Command::$Variant(Box::new(c))));
                    }
                )+
                Ok(None)
            }

            fn encode_snapshot(snapshot: &Snapshot, buf: &mut Vec<u8>) {
                $( <$M as $crate::wire::MachineWire>::encode_snapshot(&snapshot.$field, buf); )+
            }

            fn decode_snapshot(bytes: &[u8]) -> Result<Snapshot, $crate::wire::WireError> {
                Ok(Snapshot {
                    $( $field: <$M as $crate::wire::MachineWire>::decode_snapshot(bytes)?, )+
                })
            }

            fn annotate(&self, commands: &[&Command], buf: &mut Vec<u8>) {
                $(
                    let mine: Vec<&<$M as $crate::consensus::Machine>::Command> = commands
                        .iter()
                        .filter_map(|c| match c {
                            Command::$Variant(c) => Some(&**c),
                            #[allow(unreachable_patterns)]
                            _ => None,
                        })
                        .collect();
                    <$M as $crate::wire::MachineWire>::annotate(&self.$field, &mine, buf);
                )+
            }
        }

        /// Every machine's leader-side service.
        #[derive(Debug, Clone)]
        pub struct Services {
            $( pub $field: $V, )+
        }

        /// A request to one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Request {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Request), )+
        }

        /// An answer of one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Response {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Response), )+
        }

        /// A refusal of one of the machines.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Error {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Error), )+
        }

        impl std::fmt::Display for Error {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( Error::$Variant(e) => std::fmt::Display::fmt(e, f), )+
                }
            }
        }

        impl std::error::Error for Error {}

        /// What a write of one of the machines waits with.
        #[derive(Debug, Clone)]
        pub enum Waiting {
            $( $Variant(<$V as $crate::consensus::Service<State>>::Waiting), )+
        }

        impl $crate::consensus::Service<State> for Services {
            type Request = Request;
            type Response = Response;
            type Error = Error;
            type Waiting = Waiting;

            fn lead(
                &mut self,
                state: &State,
                now: $crate::time::Millis,
                renewals: $crate::consensus::Knowledge,
            ) {
                $( $crate::consensus::Service::<State>::lead(&mut self.$field, state, now, renewals); )+
            }

            fn step_down(&mut self) {
                $( $crate::consensus::Service::<State>::step_down(&mut self.$field); )+
            }

            // Renewal keys are one space for the beacon: only the registry (node IDs) makes
            // any, and each part hears all of them.
            fn hear_renewals(&mut self, keys: &[u64], now: $crate::time::Millis) {
                $( $crate::consensus::Service::<State>::hear_renewals(&mut self.$field, keys, now); )+
            }

            fn install_renewals(
                &mut self,
                table: &$crate::consensus::RenewalTable,
                now: $crate::time::Millis,
            ) {
                $( $crate::consensus::Service::<State>::install_renewals(&mut self.$field, table, now); )+
            }

            fn follow_tick(&mut self, now: $crate::time::Millis) {
                $( $crate::consensus::Service::<State>::follow_tick(&mut self.$field, now); )+
            }

            fn renewal_table(
                &self,
                state: &State,
                now: $crate::time::Millis,
            ) -> $crate::consensus::RenewalTable {
                let mut table = $crate::consensus::RenewalTable::default();
                $(
                    let part = $crate::consensus::Service::<State>::renewal_table(&self.$field, state, now);
                    if table.ages.is_empty() {
                        table.ages = part.ages;
                    } else {
                        std::sync::Arc::make_mut(&mut table.ages).extend(part.ages.iter());
                    }
                    table.rest_age = table.rest_age.max(part.rest_age);
                )+
                table
            }

            fn request(
                &mut self,
                leader: &mut $crate::consensus::Leader<'_, State>,
                request: Request,
            ) -> $crate::consensus::Outcome<Response, Error, Waiting> {
                match request {
                    $( Request::$Variant(r) =>
                        <$V as $crate::consensus::Service<State>>::request(&mut self.$field, leader, r)
                            .map(Response::$Variant, Error::$Variant, Waiting::$Variant), )+
                }
            }

            fn prefetch(&self, state: &State, request: &Request) {
                match request {
                    $( Request::$Variant(r) =>
                        <$V as $crate::consensus::Service<State>>::prefetch(&self.$field, state, r), )+
                }
            }

            fn tick(&mut self, leader: &mut $crate::consensus::Leader<'_, State>) {
                $( $crate::consensus::Service::<State>::tick(&mut self.$field, leader); )+
            }

            fn answer(&self, state: &State, waiting: Waiting) -> Result<Response, Error> {
                match waiting {
                    $( Waiting::$Variant(w) =>
                        <$V as $crate::consensus::Service<State>>::answer(&self.$field, state, w)
                            .map(Response::$Variant)
                            .map_err(Error::$Variant), )+
                }
            }
        }

        $(
            impl $crate::machines::Routes<State, $V> for Services {
                fn service(&self) -> &$V {
                    &self.$field
                }
                fn request(request: <$V as $crate::consensus::Service<State>>::Request) -> Request {
                    Request::$Variant(request)
                }
                fn response(response: Response) -> Option<<$V as $crate::consensus::Service<State>>::Response> {
                    match response {
                        Response::$Variant(r) => Some(r),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
                fn error(error: Error) -> Option<<$V as $crate::consensus::Service<State>>::Error> {
                    match error {
                        Error::$Variant(e) => Some(e),
                        #[allow(unreachable_patterns)]
                        _ => None,
                    }
                }
            }
        )+

        impl State {
            /// Every machine's gauges for `/metrics`.
            pub fn gauges(&self, sections: &Sections, wall_ms: u64) -> Vec<$crate::machines::GaugeSample> {
                let mut out = Vec::new();
                $( <$M as $crate::machines::Measured<State>>::gauges(self, &sections.$field, wall_ms, &mut out); )+
                out
            }

            /// The cluster's replicated allowlist, if a machine keeps one and it is set.
            pub fn allowlist(&self) -> Option<&std::sync::Arc<$crate::allow::Allowlist>> {
                None $( .or_else(|| <$M as $crate::machines::Served>::allowlist(&self.$field)) )+
            }

            /// What each machine holds, in a few words, by the machine's name.
            pub fn summaries(&self) -> Vec<(&'static str, String)> {
                vec![
                    $( (stringify!($field), <$M as $crate::consensus::Machine>::summary(&self.$field)), )+
                ]
            }
        }

        /// Every machine's section of the configuration.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Sections {
            $( pub $field: <$M as $crate::machines::Configurable>::Section, )+
        }

        impl Sections {
            /// Every top-level key a machine owns.
            pub fn keys() -> Vec<&'static str> {
                let mut keys = Vec::new();
                $( keys.extend_from_slice(
                    <<$M as $crate::machines::Configurable>::Section as $crate::settings::Section>::KEYS
                ); )+
                keys
            }

            /// Each machine's section, parsed and checked.
            pub fn parse(
                text: &str,
                check: &$crate::settings::Checker,
                core: &$crate::settings::CoreFacts,
                flags: &$crate::settings::KeyFlags,
            ) -> Result<Sections, $crate::settings::ConfigError> {
                Ok(Sections {
                    $( $field: $crate::settings::Section::parse(text, check, core, flags)?, )+
                })
            }

            /// Every machine's keys with the values in force.
            pub fn effective(&self, out: &mut serde_json::Map<String, serde_json::Value>) {
                $( $crate::settings::Section::effective(&self.$field, out); )+
            }

            /// What the data directory records of the machines' settings.
            pub fn identity(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
                let mut out = std::collections::BTreeMap::new();
                $( $crate::settings::Section::identity(&self.$field, &mut out); )+
                out
            }
        }

        /// Serving every machine's requests: the one place that knows which machine owns
        /// which command code.
        pub struct Dispatch;

        impl Dispatch {
            /// Serves `frame` if a machine owns its command; `None` if none does.
            pub async fn serve(
                frame: &$crate::wire::Frame,
                ctx: &$crate::machines::handle::Ctx<'_>,
            ) -> Option<Result<$crate::machines::handle::Handled, $crate::machines::handle::Reject>> {
                $(
                    if <$M as $crate::machines::Served>::owns(frame.cmd) {
                        return Some(<$M as $crate::machines::Served>::serve(frame, ctx).await);
                    }
                )+
                None
            }

            /// Serves `frames` (requests of one code that batches, arrived together) by
            /// the machine that owns them, answering each in order; `None` if none does.
            pub async fn serve_batch(
                frames: &[$crate::wire::Frame],
                ctx: &$crate::machines::handle::Ctx<'_>,
            ) -> Option<Vec<Result<$crate::machines::handle::Handled, $crate::machines::handle::Reject>>> {
                let cmd = frames.first()?.cmd;
                $(
                    if <$M as $crate::machines::Served>::owns(cmd) {
                        return Some(<$M as $crate::machines::Served>::serve_batch(frames, ctx).await);
                    }
                )+
                None
            }

            /// The role a client needs to send `cmd`; `None` if no machine owns it.
            pub fn role(cmd: u32) -> Option<$crate::auth::Role> {
                $(
                    if <$M as $crate::machines::Served>::owns(cmd) {
                        return <$M as $crate::machines::Served>::role(cmd);
                    }
                )+
                None
            }

            /// The name of request `cmd`, or `None` for a code no machine knows.
            pub fn name(cmd: u32) -> Option<String> {
                $(
                    if let Some(name) = <$M as $crate::machines::Served>::name(cmd) {
                        return Some(name);
                    }
                )+
                None
            }

            /// Whether requests `cmd` queued back to back go to the driver together.
            pub fn batches(cmd: u32) -> bool {
                false $( || <$M as $crate::machines::Served>::batches(cmd) )+
            }

            /// Every machine's gRPC service.
            pub fn grpc_services() -> Vec<&'static $crate::wire::rpc::Service> {
                let mut services = Vec::new();
                $( services.extend(<$M as $crate::machines::Served>::grpc()); )+
                services
            }

            /// What registration `node` holds, in every machine.
            pub fn held_by(
                state: &State,
                node: (u32, $crate::machines::registry::FencingToken),
            ) -> Vec<String> {
                let mut held = Vec::new();
                $( held.extend(<$M as $crate::machines::Served>::held_by(&state.$field, node)); )+
                held
            }

            /// The instances DNS name `labels` stands for: the first machine's that knows it.
            pub fn dns(
                state: &State,
                labels: &[String],
            ) -> Option<Vec<$crate::machines::DnsInstance>> {
                $(
                    if let Some(found) = <$M as $crate::machines::Served>::dns(&state.$field, labels) {
                        return Some(found);
                    }
                )+
                None
            }

            /// Every machine's JSON views on the admin HTTP API.
            pub fn views() -> Vec<$crate::machines::handle::AdminView> {
                let mut views = Vec::new();
                $( views.extend(<$M as $crate::machines::Served>::views()); )+
                views
            }

            /// Adds every machine's part to our `Hello` to a peer.
            pub fn hello_fields(sections: &Sections, buf: &mut Vec<u8>) {
                $( <$M as $crate::machines::Served>::hello_fields(&sections.$field, buf); )+
            }

            /// Checks every machine's part of a peer's `Hello` (the whole message).
            pub fn check_hello(
                sections: &Sections,
                peer: std::net::SocketAddr,
                hello: &[u8],
            ) -> Result<(), $crate::machines::handle::Reject> {
                $( <$M as $crate::machines::Served>::check_hello(&sections.$field, peer, hello)?; )+
                Ok(())
            }
        }

        impl $crate::machines::Configured<Sections> for State {
            fn configured(sections: &Sections) -> State {
                State {
                    $( $field: <$M as $crate::machines::Configured<_>>::configured(&sections.$field), )+
                }
            }
        }

        impl $crate::machines::Configured<Sections> for Services {
            fn configured(sections: &Sections) -> Services {
                Services {
                    $( $field: <$V as $crate::machines::Configured<_>>::configured(&sections.$field), )+
                }
            }
        }
    };
}

// The machines beacon replicates: one line per machine.
compose! {
    with clients;
    registry: Registry => registry::Registry, registry::RegistryService;
    sequence: Sequence => sequence::Sequences, sequence::SequenceService;
    assign: Assign => assign::Assignments, assign::AssignService;
    tasks: Tasks => tasks::Tasks, tasks::TaskService;
    configs: Configs => configs::ConfigStore, configs::ConfigService;
}

/// A beacon's replica of every machine.
pub type Replica = crate::consensus::Replica<State, Services>;

#[cfg(feature = "server")]
/// How far a read of each machine alone must have applied the log, for read index `index`
/// (see `ReadIndexReply.machines`): the last entry that changed it, when at or before
/// `index`, else `index`. Said of a replica that has applied the log through `index` (every
/// change through it is then known); one that has not says `index` for each.
pub(crate) fn machine_indexes(replica: &Replica, index: u64) -> Vec<crate::pb::MachineIndex> {
    indexes_of(
        |part| replica.changed(part).index,
        replica.applied().index,
        index,
    )
}

#[cfg(feature = "server")]
/// [`machine_indexes`] of a replica applied through `applied` whose part `p` last changed
/// at `changed(p)`.
fn indexes_of(
    changed: impl Fn(usize) -> u64,
    applied: u64,
    index: u64,
) -> Vec<crate::pb::MachineIndex> {
    Machines::ALL
        .iter()
        .enumerate()
        .map(|(part, machine)| crate::pb::MachineIndex {
            machine: machine.name().to_owned(),
            index: if applied >= index {
                changed(part).min(index)
            } else {
                index
            },
        })
        .collect()
}

#[cfg(feature = "server")]
/// The index a read of `part` (the whole state with `None`) must have applied the log
/// through, from a leader's read index and what it said of each machine.
pub(crate) fn machine_index(
    part: Option<usize>,
    index: u64,
    machines: &[crate::pb::MachineIndex],
) -> u64 {
    let Some(machine) = part.and_then(|p| Machines::ALL.get(p)) else {
        return index;
    };
    machines
        .iter()
        .find(|m| m.machine == machine.name())
        .map_or(index, |m| m.index.min(index))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::assign::{AssignCmd, AssignErrorCode};
    use super::configs::{ConfigCmd, ConfigErrorCode};
    use super::registry::{RegistryCmd, RegistryErrorCode};
    use super::sequence::{SequenceCmd, SequenceErrorCode};
    use super::tasks::{TasksCmd, TasksErrorCode};
    use crate::wire::{Cmd, Code, ErrorCode};

    #[cfg(feature = "server")]
    /// A leader says, for each machine, how far a follower must apply to read it: the last
    /// entry that changed it when the read index covers that, else the read index; and
    /// nothing but the read index while it has not applied that far itself.
    #[test]
    fn a_follower_reads_a_machine_from_the_last_entry_that_changed_it() {
        use super::{Machines, Part, State, indexes_of, machine_index};
        let names: Vec<&str> = Machines::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(
            names,
            ["registry", "sequence", "assign", "tasks", "configs"]
        );
        let sequence = <State as Part<super::sequence::Sequences>>::INDEX;
        assert_eq!(Machines::ALL[sequence].name(), "sequence");
        // The sequences last changed at 4, the registry at 12; read index 10.
        let changed = |part: usize| match part {
            0 => 12,
            1 => 4,
            _ => 0,
        };
        let said = indexes_of(changed, 12, 10);
        let by_name: Vec<(&str, u64)> =
            said.iter().map(|m| (m.machine.as_str(), m.index)).collect();
        assert_eq!(
            by_name,
            [
                ("registry", 10),
                ("sequence", 4),
                ("assign", 0),
                ("tasks", 0),
                ("configs", 0)
            ]
        );
        assert_eq!(machine_index(Some(sequence), 10, &said), 4);
        assert_eq!(machine_index(Some(0), 10, &said), 10);
        assert_eq!(machine_index(None, 10, &said), 10, "the whole state");
        assert_eq!(
            machine_index(Some(sequence), 10, &[]),
            10,
            "a leader that says none"
        );
        // Applied through 8 only: it cannot say what changed up to 10.
        let unknown = indexes_of(changed, 8, 10);
        assert!(unknown.iter().all(|m| m.index == 10), "{unknown:?}");
        // An index said above the read index is read as the read index.
        let odd = [crate::pb::MachineIndex {
            machine: "sequence".into(),
            index: 99,
        }];
        assert_eq!(machine_index(Some(sequence), 10, &odd), 10);
    }

    #[test]
    fn an_answer_stays_small() {
        // Each answer is moved some seven times between the core and its connection (the
        // wait for a confirmation round, the answers of a step, the reply channel). It was
        // 240 bytes, with a task or a record inline, where a renewal's own answer is 40;
        // under renewals, moving requests and answers was a fifth of the leader's samples.
        // Large variants are boxed.
        let size = std::mem::size_of::<crate::consensus::Reply<super::State, super::Services>>();
        assert!(size <= 96, "an answer is {size} bytes");
    }

    /// Every request code and its response (`cmd + 1`) belongs to one owner.
    fn claim(taken: &mut BTreeSet<u32>, owner: &str, code: u32) {
        assert!(taken.insert(code), "{owner}: code {code} is taken twice");
        assert!(
            taken.insert(code + 1),
            "{owner}: response code {} is taken twice",
            code + 1
        );
    }

    use crate::wire::shouted;

    /// docs/protocol.md lists every command and error code as the code has it, so a new one
    /// cannot go unlisted and a renamed one cannot stay listed under its old name.
    #[test]
    fn the_protocol_page_lists_every_code() {
        let page = include_str!("../../docs/protocol.md");
        let mut rows: Vec<String> = Vec::new();
        let mut cmd = |owner: &str, code: u32, name: String| {
            rows.push(format!("| {code} | {owner} | `{name}` |"))
        };
        for c in Cmd::ALL {
            cmd("core", c.code(), format!("{c:?}"));
        }
        for c in RegistryCmd::ALL {
            cmd("registry", c.code(), format!("{c:?}"));
        }
        for c in SequenceCmd::ALL {
            cmd("sequence", c.code(), format!("{c:?}"));
        }
        for c in AssignCmd::ALL {
            cmd("assign", c.code(), format!("{c:?}"));
        }
        for c in TasksCmd::ALL {
            cmd("tasks", c.code(), format!("{c:?}"));
        }
        for c in ConfigCmd::ALL {
            cmd("configs", c.code(), format!("{c:?}"));
        }
        let mut error = |owner: &str, code: u32, name: String| {
            rows.push(format!("| {code} | {owner} | `{}` |", shouted(&name)))
        };
        for e in ErrorCode::ALL {
            error("core", e as u32, format!("{e:?}"));
        }
        for e in RegistryErrorCode::ALL {
            error("registry", u32::from(e), format!("{e:?}"));
        }
        for e in SequenceErrorCode::ALL {
            error("sequence", u32::from(e), format!("{e:?}"));
        }
        for e in AssignErrorCode::ALL {
            error("assign", u32::from(e), format!("{e:?}"));
        }
        for e in TasksErrorCode::ALL {
            error("tasks", u32::from(e), format!("{e:?}"));
        }
        for e in ConfigErrorCode::ALL {
            error("configs", u32::from(e), format!("{e:?}"));
        }
        let missing: Vec<&String> = rows.iter().filter(|r| !page.contains(r.as_str())).collect();
        assert!(missing.is_empty(), "docs/protocol.md lacks {missing:#?}");
        let listed = page.lines().filter(|l| {
            let mut cells = l.split('|').map(str::trim).skip(1);
            cells.next().is_some_and(|c| c.parse::<u32>().is_ok())
                && cells.next().is_some_and(|o| {
                    ["core", "registry", "sequence", "assign", "tasks", "configs"].contains(&o)
                })
        });
        assert_eq!(
            listed.count(),
            rows.len(),
            "docs/protocol.md lists a code the code lacks"
        );
    }

    /// Each machine's gRPC service gives every one of its error codes a status, under the
    /// name the protocol page gives it.
    #[test]
    fn every_machine_error_has_a_grpc_status() {
        fn check(errors: &[(u32, &str, crate::wire::rpc::GrpcCode)], code: u32, name: String) {
            let found = errors.iter().find(|(c, _, _)| *c == code);
            assert_eq!(
                found.map(|(_, n, _)| *n),
                Some(name.as_str()),
                "code {code}"
            );
        }
        for e in RegistryErrorCode::ALL {
            check(
                super::registry::grpc::SERVICE.errors,
                u32::from(e),
                shouted(&format!("{e:?}")),
            );
        }
        for e in SequenceErrorCode::ALL {
            check(
                super::sequence::grpc::SERVICE.errors,
                u32::from(e),
                shouted(&format!("{e:?}")),
            );
        }
        for e in AssignErrorCode::ALL {
            check(
                super::assign::grpc::SERVICE.errors,
                u32::from(e),
                shouted(&format!("{e:?}")),
            );
        }
        for e in TasksErrorCode::ALL {
            check(
                super::tasks::grpc::SERVICE.errors,
                u32::from(e),
                shouted(&format!("{e:?}")),
            );
        }
    }

    #[test]
    fn the_machines_command_and_error_codes_do_not_overlap() {
        let mut cmds = BTreeSet::new();
        for c in Cmd::ALL {
            claim(&mut cmds, "core", c.code());
        }
        for c in RegistryCmd::ALL {
            claim(&mut cmds, "registry", c.code());
        }
        for c in SequenceCmd::ALL {
            claim(&mut cmds, "sequence", c.code());
        }
        for c in AssignCmd::ALL {
            claim(&mut cmds, "assign", c.code());
        }
        for c in TasksCmd::ALL {
            claim(&mut cmds, "tasks", c.code());
        }
        for c in ConfigCmd::ALL {
            claim(&mut cmds, "configs", c.code());
        }
        let mut errors = BTreeSet::new();
        for e in ErrorCode::ALL {
            assert!(errors.insert(e as u32), "core error {e:?}");
        }
        for e in RegistryErrorCode::ALL {
            assert!(
                errors.insert(u32::from(e)),
                "registry error {e:?} is a core code"
            );
        }
        for e in SequenceErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "sequence error {e:?} is taken");
        }
        for e in AssignErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "assign error {e:?} is taken");
        }
        for e in TasksErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "tasks error {e:?} is taken");
        }
        for e in ConfigErrorCode::ALL {
            assert!(errors.insert(u32::from(e)), "configs error {e:?} is taken");
        }
    }
}
