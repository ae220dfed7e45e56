//! Task queues' server handlers: queues, submits, workers' reports, the worker and queue
//! streams, and the read-only lists (`show queues`, `show tasks`).

use super::service::{Request, Response, TaskError, TaskService};
use super::state::{Change, Task, TaskState, Tasks, WorkerId};
use super::wire::{TasksCmd, TasksErrorCode, queue_to_pb, task_to_pb};
use crate::auth::Role;
use crate::machines::follow;
use crate::machines::handle::{self, CoreExt, Ctx, Handled, Reject, reply, unexpected};
use crate::machines::registry::{self, FencingToken, Registry};
use crate::machines::{Part, State};
use crate::pb::tasks as pb;
use crate::time::wall_ms;
use crate::wire::{ErrorCode, Frame};

impl crate::machines::Commands for TasksCmd {
    fn from_code(code: u32) -> Option<Self> {
        TasksCmd::from_code(code)
    }

    /// The role a client needs to send it when authentication is on (see [`crate::auth`]).
    fn role(self) -> Role {
        match self {
            TasksCmd::CreateQueue
            | TasksCmd::DeleteQueue
            | TasksCmd::Requeue
            | TasksCmd::Purge
            | TasksCmd::WorkNotice
            | TasksCmd::QueueNotice => Role::Admin,
            TasksCmd::Submit
            | TasksCmd::Cancel
            | TasksCmd::Complete
            | TasksCmd::Fail
            | TasksCmd::Heartbeat
            | TasksCmd::Work => Role::Service,
            TasksCmd::Get | TasksCmd::List | TasksCmd::Queues | TasksCmd::WatchQueue => Role::Read,
        }
    }

    /// Submissions, results and heartbeats queued back to back go to the driver together.
    fn batches(self) -> bool {
        matches!(
            self,
            TasksCmd::Submit | TasksCmd::Complete | TasksCmd::Fail | TasksCmd::Heartbeat
        )
    }
}

fn token(term: u64, index: u64) -> FencingToken {
    FencingToken { term, index }
}

/// Serves one of the task queues' requests.
pub(crate) async fn serve(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let Some(cmd) = TasksCmd::from_code(frame.cmd) else {
        unreachable!("routed here by `owns`");
    };
    match cmd {
        TasksCmd::CreateQueue => {
            let req: pb::CreateQueue = frame.decode()?;
            let request = Request::CreateQueue {
                name: req.name,
                timeout_ms: (req.timeout_ms > 0).then_some(req.timeout_ms),
                max_attempts: (req.max_attempts > 0).then_some(req.max_attempts),
                wall_ms: wall_ms(),
            };
            reply(frame, &queue_reply(submit(ctx, request).await?)?)
        }
        TasksCmd::DeleteQueue => {
            let req: pb::DeleteQueue = frame.decode()?;
            let answer = submit(ctx, Request::DeleteQueue(req.name)).await?;
            reply(frame, &queue_reply(answer)?)
        }
        TasksCmd::Submit => {
            let req: pb::Submit = frame.decode()?;
            let request = Request::Submit {
                queue: req.queue,
                name: req.name,
                payload: req.payload,
                priority: req.priority,
                timeout_ms: (req.timeout_ms > 0).then_some(req.timeout_ms),
                max_attempts: (req.max_attempts > 0).then_some(req.max_attempts),
                delay_ms: req.delay_ms,
                submit_id: req.submit_id,
                wall_ms: wall_ms(),
            };
            reply(frame, &task_reply(submit(ctx, request).await?, true)?)
        }
        TasksCmd::Get => {
            let req: pb::GetTask = frame.decode()?;
            reply(frame, &get(ctx, req).await?)
        }
        TasksCmd::List => reply(frame, &list(ctx, frame.decode()?).await?),
        TasksCmd::Queues => reply(frame, &queues(ctx, frame.decode()?).await?),
        TasksCmd::Cancel => {
            let req: pb::Cancel = frame.decode()?;
            let request = Request::Cancel {
                queue: req.queue,
                name: req.name,
                wall_ms: wall_ms(),
            };
            reply(frame, &task_reply(submit(ctx, request).await?, true)?)
        }
        TasksCmd::Complete => {
            let req: pb::Complete = frame.decode()?;
            check_runner(ctx, &req.queue, &req.name).await?;
            let request = Request::Complete {
                queue: req.queue,
                name: req.name,
                token: token(req.term, req.index),
                result: req.result,
                wall_ms: wall_ms(),
            };
            reply(frame, &task_reply(submit(ctx, request).await?, true)?)
        }
        TasksCmd::Fail => {
            let req: pb::Fail = frame.decode()?;
            check_runner(ctx, &req.queue, &req.name).await?;
            let request = Request::Fail {
                queue: req.queue,
                name: req.name,
                token: token(req.term, req.index),
                error: req.error,
                retry: req.retry,
                wall_ms: wall_ms(),
            };
            reply(frame, &task_reply(submit(ctx, request).await?, true)?)
        }
        TasksCmd::Heartbeat => {
            let req: pb::Heartbeat = frame.decode()?;
            check_runner(ctx, &req.queue, &req.name).await?;
            let request = Request::Heartbeat {
                queue: req.queue,
                name: req.name,
                token: token(req.term, req.index),
            };
            reply(frame, &task_reply(submit(ctx, request).await?, true)?)
        }
        TasksCmd::Work => work(frame, ctx).await,
        TasksCmd::WatchQueue => watch_queue_stream(frame, ctx).await,
        TasksCmd::Requeue => {
            let req: pb::Requeue = frame.decode()?;
            let request = Request::Requeue {
                queue: req.queue,
                names: req.names,
            };
            reply(frame, &tasks_done(submit(ctx, request).await?)?)
        }
        TasksCmd::Purge => {
            let req: pb::Purge = frame.decode()?;
            let request = Request::Purge {
                queue: req.queue,
                names: req.names,
            };
            reply(frame, &tasks_done(submit(ctx, request).await?)?)
        }
        TasksCmd::WorkNotice | TasksCmd::QueueNotice => Err(Reject::new(
            ErrorCode::UnknownCommand,
            format!(
                "task notices (cmd {}) are sent by beacons to watchers, not to beacons",
                frame.cmd
            ),
        )),
    }
}

/// A worker begins serving (committed first), then follows what it is given: the tasks it
/// runs as of the last log position, then a notice per committed change that starts one on
/// it or ends one of its attempts without its report.
async fn work(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let req: pb::Work = frame.decode()?;
    let me: WorkerId = (req.node_id, token(req.term, req.index));
    if !me.1.is_given() {
        return Err(Reject::new(
            ErrorCode::InvalidRequest,
            "name the worker's registration: give its node ID and fencing token (term, index)",
        ));
    }
    registry::rpc::check_owner(ctx, me.0, me.1).await?;
    let request = Request::Serve {
        worker: me,
        queues: req.queues,
        capacity: req.capacity,
        wall_ms: wall_ms(),
    };
    match submit(ctx, request).await? {
        Response::Served => {}
        other => return Err(unexpected(other)),
    }
    follow::follow(
        frame,
        ctx,
        TasksCmd::WorkNotice,
        "a worker's tasks",
        "this beacon stopped leading: serve again at the leader",
        0,
        None,
        move |tasks: &Tasks, start| {
            let running = tasks
                .running_on(&me)
                .map(|t| task_to_pb(t, false))
                .collect();
            let notice = move |index, changes: &Vec<Change>| {
                let mut notice = pb::WorkNotice {
                    index,
                    ..Default::default()
                };
                for c in changes {
                    match c {
                        Change::Task(t) if t.running().is_some_and(|r| r.worker == me) => {
                            notice.started.push(task_to_pb(t, false))
                        }
                        Change::Released { queue, name, run } if run.worker == me => {
                            notice.lost.push(pb::TaskInfo {
                                queue: queue.clone(),
                                name: name.clone(),
                                run: Some(super::wire::run_to_pb(run)),
                                ..Default::default()
                            })
                        }
                        _ => {}
                    }
                }
                let quiet = notice.started.is_empty() && notice.lost.is_empty();
                (!quiet).then_some(notice)
            };
            let answer = pb::WorkReply {
                index: start.index(),
                running,
            };
            Ok(follow::Listed::whole(answer, notice))
        },
        |index| pb::WorkNotice {
            index,
            ..Default::default()
        },
    )
    .await
}

/// Follows a queue's finished tasks (leader only): those of the names asked about that have
/// finished, then a notice per committed change that finishes tasks of the queue.
async fn watch_queue_stream(frame: &Frame, ctx: &Ctx<'_>) -> Result<Handled, Reject> {
    let req: pb::WatchQueue = frame.decode()?;
    super::state::check_name("queue", &req.queue).map_err(invalid)?;
    follow::follow(
        frame,
        ctx,
        TasksCmd::QueueNotice,
        "a queue's finished tasks",
        "this beacon stopped leading: watch again at the leader",
        req.start_index,
        Some(follow::kind_of(&req.queue)),
        move |tasks: &Tasks, start| {
            let Some(q) = tasks.queue(&req.queue) else {
                return Err(reject(TaskError::UnknownQueue(req.queue.clone())));
            };
            let mut answer = pb::WatchQueueReply {
                index: start.index(),
                resumed: start.resumed(),
                ..Default::default()
            };
            let listed: &[String] = if start.resumed() { &[] } else { &req.names };
            for name in listed {
                match q.get(name) {
                    Some(t) if t.state.is_finished() => answer.finished.push(task_to_pb(t, false)),
                    Some(_) => {}
                    None => answer.unknown.push(name.clone()),
                }
            }
            let queue = req.queue.clone();
            let notice = move |index, changes: &Vec<Change>| {
                let finished: Vec<pb::TaskInfo> = changes
                    .iter()
                    .filter_map(|c| match c {
                        Change::Task(t) if t.queue == queue && t.state.is_finished() => {
                            Some(task_to_pb(t, false))
                        }
                        _ => None,
                    })
                    .collect();
                (!finished.is_empty()).then_some(pb::QueueNotice { index, finished })
            };
            Ok(follow::Listed::whole(answer, notice))
        },
        |index| pb::QueueNotice {
            index,
            ..Default::default()
        },
    )
    .await
}

/// A `service` identity reports only on attempts its own registrations run.
async fn check_runner(ctx: &Ctx<'_>, queue: &str, name: &str) -> Result<(), Reject> {
    if ctx.identity.is_none() {
        return Ok(());
    }
    let (queue, name) = (queue.to_owned(), name.to_owned());
    let runner = ctx
        .driver
        .read(move |replica, _| {
            let tasks = <State as Part<Tasks>>::part(replica.state());
            tasks
                .queue(&queue)
                .and_then(|q| q.get(&name))
                .and_then(|t| t.running().map(|r| r.worker))
        })
        .await?;
    match runner {
        Some((node_id, registration)) => {
            registry::rpc::check_owner(ctx, node_id, registration).await
        }
        None => Ok(()),
    }
}

/// Submits a request to this machine's service; its refusals become replies.
async fn submit(ctx: &Ctx<'_>, request: Request) -> Result<Response, Reject> {
    handle::submit::<TaskService>(ctx, request, reject).await
}

fn invalid(e: impl std::fmt::Display) -> Reject {
    Reject::new(ErrorCode::InvalidRequest, e.to_string())
}

/// The code and text a refusal is sent with.
fn reject(e: TaskError) -> Reject {
    let code: u32 = match &e {
        TaskError::Name(_) | TaskError::Invalid(_) | TaskError::NotRegistered(_) => {
            ErrorCode::InvalidRequest.into()
        }
        TaskError::TooLarge { .. } => TasksErrorCode::TooLarge.into(),
        TaskError::UnknownQueue(_) => TasksErrorCode::UnknownQueue.into(),
        TaskError::UnknownTask { .. } => TasksErrorCode::UnknownTask.into(),
        TaskError::QueueConflict { .. } => TasksErrorCode::QueueConflict.into(),
        TaskError::QueueInUse { .. } => TasksErrorCode::QueueInUse.into(),
        TaskError::TooMany { .. } => TasksErrorCode::TooManyTasks.into(),
        TaskError::NotHolder { .. } => TasksErrorCode::NotTaskHolder.into(),
        TaskError::Finished { .. } => TasksErrorCode::TaskFinished.into(),
    };
    Reject::new(code, e.to_string())
}

fn queue_reply(answer: Response) -> Result<pb::QueueReply, Reject> {
    match answer {
        Response::Queue(q) => Ok(pb::QueueReply {
            queue: q.as_ref().map(queue_to_pb),
        }),
        other => Err(unexpected(other)),
    }
}

fn task_reply(answer: Response, brief: bool) -> Result<pb::TaskReply, Reject> {
    match answer {
        Response::Task(t) => Ok(pb::TaskReply {
            task: Some(task_to_pb(&t, brief)),
        }),
        other => Err(unexpected(other)),
    }
}

fn tasks_done(answer: Response) -> Result<pb::TasksDone, Reject> {
    match answer {
        Response::Tasks(tasks) => Ok(pb::TasksDone {
            tasks: tasks.iter().map(|t| task_to_pb(t, true)).collect(),
        }),
        other => Err(unexpected(other)),
    }
}

/// One task, read from this beacon's state.
async fn get(ctx: &Ctx<'_>, req: pb::GetTask) -> Result<pb::TaskReply, Reject> {
    super::state::check_name("queue", &req.queue).map_err(invalid)?;
    super::state::check_name("task", &req.name).map_err(invalid)?;
    ctx.read_of::<Tasks, _>(move |replica, _| {
        let state = <State as Part<Tasks>>::part(replica.state());
        match state.queue(&req.queue) {
            None => Err(reject(TaskError::UnknownQueue(req.queue))),
            Some(q) => match q.get(&req.name) {
                None => Err(reject(TaskError::UnknownTask {
                    queue: req.queue,
                    name: req.name,
                })),
                Some(t) => Ok(pb::TaskReply {
                    task: Some(task_to_pb(t, false)),
                }),
            },
        }
    })
    .await?
}

const STATES: [&str; 6] = [
    "pending",
    "running",
    "completed",
    "failed",
    "dead",
    "cancelled",
];

async fn list(ctx: &Ctx<'_>, req: pb::TasksRequest) -> Result<pb::TasksReply, Reject> {
    super::state::check_name("queue", &req.queue).map_err(invalid)?;
    if !req.state.is_empty() && !STATES.contains(&req.state.as_str()) {
        return Err(invalid(format!(
            "`{}` is no task state: use one of {}",
            req.state,
            STATES.join(", ")
        )));
    }
    let limit = if req.limit == 0 { 1000 } else { req.limit } as usize;
    ctx.read_of::<Tasks, _>(move |replica, _| {
        let state = <State as Part<Tasks>>::part(replica.state());
        let Some(q) = state.queue(&req.queue) else {
            return Err(reject(TaskError::UnknownQueue(req.queue)));
        };
        let of_state = |t: &&Task| req.state.is_empty() || t.state.name() == req.state;
        // Pending tasks first, in the order they start in: those due now by priority
        // then submission, then the delayed ones by when they become due. The others
        // follow by submission.
        let now = wall_ms();
        let mut chosen: Vec<&Task> = Vec::new();
        if req.state.is_empty() || req.state == "pending" {
            let (due, mut delayed): (Vec<&Task>, Vec<&Task>) =
                q.pending().partition(|t| t.not_before_ms <= now);
            delayed.sort_by_key(|t| (t.not_before_ms, t.seq));
            chosen.extend(due);
            chosen.extend(delayed);
        }
        if req.state != "pending" {
            let mut rest: Vec<&Task> = q
                .tasks()
                .filter(of_state)
                .filter(|t| t.state.name() != "pending")
                .collect();
            rest.sort_by_key(|t| t.seq);
            chosen.extend(rest);
        }
        let total = chosen.len() as u64;
        chosen.truncate(limit);
        Ok(pb::TasksReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.read_through(<State as Part<Tasks>>::INDEX),
            tasks: chosen
                .into_iter()
                .map(|t| task_to_pb(t, req.brief))
                .collect(),
            total,
            now_ms: now,
            stale: replica.staleness(),
        })
    })
    .await?
}

async fn queues(ctx: &Ctx<'_>, req: pb::QueuesRequest) -> Result<pb::QueuesReply, Reject> {
    ctx.read(move |replica, _| {
        let state = replica.state();
        let tasks = <State as Part<Tasks>>::part(state);
        let registry = <State as Part<Registry>>::part(state);
        let (queues, next, total) = crate::machines::handle::page(
            tasks.queues(),
            |q| &q.spec.name,
            &req.from,
            req.limit,
            |q| {
                let mut view = pb::QueueView {
                    queue: Some(queue_to_pb(&q.spec)),
                    ..Default::default()
                };
                for t in q.tasks() {
                    match t.state {
                        TaskState::Pending => view.pending += 1,
                        TaskState::Running(_) => view.running += 1,
                        TaskState::Completed(_) => view.completed += 1,
                        TaskState::Failed => view.failed += 1,
                        TaskState::Dead => view.dead += 1,
                        TaskState::Cancelled => view.cancelled += 1,
                    }
                }
                view.oldest_pending_ms = q.pending().map(|t| t.submitted_ms).min().unwrap_or(0);
                for w in tasks.workers() {
                    if registry.is_live(w.id.0, w.id.1) && w.queues.contains(&q.spec.name) {
                        view.workers += 1;
                        view.capacity += u64::from(w.capacity);
                    }
                }
                view
            },
        );
        pb::QueuesReply {
            node: replica.config().me.to_string(),
            is_leader: replica.is_leader(),
            index: replica.applied().index,
            queues,
            now_ms: wall_ms(),
            stale: replica.staleness(),
            next,
            total,
        }
    })
    .await
}

impl crate::machines::Served for super::Tasks {
    type Cmd = TasksCmd;

    /// The tasks it runs (a draining worker gets no new one; these finish).
    fn held_by(&self, node: (u32, crate::machines::registry::FencingToken)) -> Vec<String> {
        self.running_on(&node)
            .map(|t| format!("task {}/{}", t.queue, t.name))
            .collect()
    }

    fn grpc() -> Option<&'static crate::wire::rpc::Service> {
        Some(&super::grpc::SERVICE)
    }

    fn views() -> Vec<crate::machines::handle::AdminView> {
        use crate::machines::handle::{AdminView, json_of};
        vec![AdminView::new(
            "/v1/queues",
            "`show queues`",
            TasksCmd::Queues,
            |ctx, params| {
                Box::pin(async move {
                    let (limit, from) = crate::machines::handle::view_page(params)?;
                    Ok(json_of(
                        &queues(ctx, pb::QueuesRequest { limit, from }).await?,
                    ))
                })
            },
        )]
    }

    fn serve<'a>(
        frame: &'a crate::wire::Frame,
        ctx: &'a Ctx<'a>,
    ) -> impl Future<Output = Result<Handled, Reject>> + Send + 'a {
        serve(frame, ctx)
    }
}
