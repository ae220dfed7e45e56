// Package beacon is the Go client of beacon, the cluster coordinator, over its gRPC API.
//
// A [Client] holds every beacon of a cluster (any of them takes any call: a follower
// relays what only the leader can answer) and moves past one that is down, refuses
// connections, or hangs: a fresh connection dials the next beacon when the one before has
// not answered within [Config.AttemptDelay], and a call waiting on a silent beacon probes
// it over a fresh connection every half [Config.PingInterval] and leaves it for the next
// one when it does not answer. Every call takes a [context.Context]; refusals are [*Error]
// values that [errors.Is] tells apart by kind ([ErrBusy], [ErrLeaseLost], [ErrCompacted],
// [ErrTooLarge], ...). A leader change (NOT_LEADER, LEADER_CHANGED, NO_QUORUM) and BUSY
// (after its retry-after, with jitter) are retried within [Config.RetryFor].
//
// What a service uses:
//
//   - [Client.Register]: a node ID with its lease kept alive in the background
//     ([Registration]), health reports and checks ([Registration.RunChecks]), fencing tokens.
//   - [Client.Nodes] and [Client.Watch]: discovery, a watch that resumes from its log index
//     across leader changes (every change once, in order).
//   - [Client.Sequence]: numbers from a double buffer of segments; [NewSnowflake]: IDs made
//     locally on a registration's node ID.
//   - [Client.ConfigGet], [Client.ConfigPut], [Client.ConfigWatch]: config documents.
//
// Nothing here is global: each Client has its own connections and its own record of the
// beacons that lately did not answer, and every goroutine it starts ends with the handle
// that started it ([Client.Close], [Registration.Close], [Watch.Close], ...). Logs go
// through [log/slog] ([Config.Logger]).
package beacon
