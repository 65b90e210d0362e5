//! Log commands: what a server accepted from a client, stamped with session, cxid and time.
//! Their encoding is the log entry, so it is versioned and decoding never trusts its input.

use crate::Zxid;
use zoolog_proto::{DecodeError, Id, Jute, Reader, Request};

/// The first byte of every encoded command; bump it when the layout changes.
/// Version 2 added [`Command::owner`]; version 1 entries still decode, with owner 0.
const ENCODING_VERSION: u8 = 2;
const ENCODING_VERSION_1: u8 = 1;

/// A command in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub session_id: i64,
    pub cxid: i32,
    /// Wall-clock time stamped by the accepting server: the ctime/mtime of what this creates.
    pub time_ms: i64,
    /// Token of the client connection that sent this command (0 for commands no connection
    /// sent, and for every command of a server that does not track owners). A session belongs
    /// to the owner that created or last attached it; a write or close carrying another owner
    /// fails with SESSIONMOVED (see [`CommandOp::Attach`]).
    pub owner: u64,
    pub op: CommandOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandOp {
    /// Opens a session. Its id is assigned by apply, `(server_id << 56) | zxid`, unique forever
    /// because zxids are; the proposer only chooses the password. The session's owner is the
    /// command's [`Command::owner`] and it counts as touched at this zxid.
    CreateSession { timeout_ms: i32, password: Vec<u8> },
    /// Explicit close: deletes the session's ephemerals. Unknown session: no-op
    /// ([`Outcome::SessionClosed`](crate::Outcome::SessionClosed) all the same). From a
    /// connection that is not the session's owner: `Reply(Err(SessionMoved))` and no effect.
    CloseSession,
    /// A client write (create*, delete, setData, setACL, multi, sync) with the caller's
    /// identities at submit time, for ACL checks and `auth` expansion. From the session's owner
    /// it touches the session, whatever its result; from another owner every op that checks
    /// its session fails with SESSIONMOVED.
    Write {
        request: Request,
        identities: Vec<Id>,
    },
    /// Container/TTL reaper: deletes `path` if it is still an empty container or a childless
    /// TTL node and its last change (mzxid) is still `unchanged_since`. Whoever appends it has
    /// judged the node due by its own monotonic clock, counting from when it first saw that
    /// change: so no server's wall clock, skewed or stepped, can make a node due early, and a
    /// change ordered after the judgment cancels it on every replica. Entries written before
    /// the condition existed carry `None` and are judged by this command's time against the
    /// node's mtime, as they were then.
    Reap {
        path: String,
        unchanged_since: Option<Zxid>,
    },
    /// Batched liveness: each listed live session counts as touched at this zxid. Ids of
    /// unknown or closed sessions are ignored. `session_id` of the command is not used.
    Touch { sessions: Vec<SessionSeen> },
    /// Conditional expiry of the command's `session_id`: closes it exactly as
    /// [`CommandOp::CloseSession`] does unless it was touched at a zxid greater than
    /// `unless_touched_after` (or is gone already), in which case it is a no-op. Ownership is
    /// not checked: any server may append it. Why this is safe: see the crate documentation.
    Expire { unless_touched_after: Zxid },
    /// The client of the command's `session_id` reconnected through connection `owner`,
    /// proving itself with the session's `password`: the session now belongs to it and counts
    /// as touched. The password is checked here, at apply, because the accepting server may
    /// not have applied the session's creation yet when the client arrives. Unknown session
    /// or wrong password: no-op.
    Attach { owner: u64, password: Vec<u8> },
}

const TAG_CREATE_SESSION: u8 = 1;
const TAG_CLOSE_SESSION: u8 = 2;
const TAG_WRITE: u8 = 3;
const TAG_REAP: u8 = 4;
const TAG_TOUCH: u8 = 5;
const TAG_EXPIRE: u8 = 6;
const TAG_ATTACH: u8 = 7;
/// A Touch whose sessions carry how long ago they were heard from; [`TAG_TOUCH`] entries (ids
/// only) still decode, as heard from when appended.
const TAG_TOUCH_SEEN: u8 = 8;
/// A Reap conditioned on the node's last change; [`TAG_REAP`] entries (path only) still
/// decode, judged by their time.
const TAG_REAP_UNCHANGED: u8 = 9;

/// A session a Touch reports alive, and how long before the Touch was appended its client was
/// last heard from: whoever decides expiry counts the session's timeout from then, so a
/// report may come late (servers report a session about once a third of its timeout, not at
/// every ping) without keeping a dead client's session alive longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSeen {
    pub session_id: i64,
    pub idle_ms: u32,
}

impl SessionSeen {
    pub fn just_now(session_id: i64) -> SessionSeen {
        SessionSeen {
            session_id,
            idle_ms: 0,
        }
    }
}

impl Jute for SessionSeen {
    fn write_to(&self, out: &mut Vec<u8>) {
        self.session_id.write_to(out);
        // Jute has no unsigned int; beyond i32::MAX (24 days) every idle time means "long ago".
        (self.idle_ms.min(i32::MAX as u32) as i32).write_to(out);
    }
    fn read_from(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok(SessionSeen {
            session_id: i64::read_from(reader)?,
            // A negative idle time means nothing sensible: count it as just heard from.
            idle_ms: u32::try_from(i32::read_from(reader)?).unwrap_or(0),
        })
    }
}

impl Command {
    /// The sessions whose clients this command says were heard from, each with how long
    /// before the command that was: a Touch's list, or the own session of a Write or an
    /// Attach, just now. Whether each counts as a sign of life is the apply's to say
    /// ([`crate::DataTree::signs_of_life`]).
    pub(crate) fn sessions_heard(&self) -> impl Iterator<Item = SessionSeen> + '_ {
        let listed: &[SessionSeen] = match &self.op {
            CommandOp::Touch { sessions } => sessions,
            _ => &[],
        };
        let direct = matches!(self.op, CommandOp::Write { .. } | CommandOp::Attach { .. })
            .then(|| SessionSeen::just_now(self.session_id));
        listed.iter().copied().chain(direct)
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(ENCODING_VERSION);
        self.session_id.write_to(&mut out);
        self.cxid.write_to(&mut out);
        self.time_ms.write_to(&mut out);
        (self.owner as i64).write_to(&mut out);
        match &self.op {
            CommandOp::CreateSession {
                timeout_ms,
                password,
            } => {
                out.push(TAG_CREATE_SESSION);
                timeout_ms.write_to(&mut out);
                Some(password.clone()).write_to(&mut out);
            }
            CommandOp::CloseSession => out.push(TAG_CLOSE_SESSION),
            CommandOp::Write {
                request,
                identities,
            } => {
                out.push(TAG_WRITE);
                identities.write_to(&mut out);
                request.opcode().code().write_to(&mut out);
                // The body goes last: Request::decode reads it from the rest of the entry.
                request.write_body(&mut out);
            }
            CommandOp::Reap {
                path,
                unchanged_since: None,
            } => {
                out.push(TAG_REAP);
                path.write_to(&mut out);
            }
            CommandOp::Reap {
                path,
                unchanged_since: Some(last_change),
            } => {
                out.push(TAG_REAP_UNCHANGED);
                path.write_to(&mut out);
                last_change.write_to(&mut out);
            }
            CommandOp::Touch { sessions } => {
                out.push(TAG_TOUCH_SEEN);
                sessions.write_to(&mut out);
            }
            CommandOp::Expire {
                unless_touched_after,
            } => {
                out.push(TAG_EXPIRE);
                unless_touched_after.write_to(&mut out);
            }
            CommandOp::Attach { owner, password } => {
                out.push(TAG_ATTACH);
                (*owner as i64).write_to(&mut out);
                Some(password.clone()).write_to(&mut out);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, DecodeError> {
        let reader = &mut Reader::new(bytes);
        let version = reader.take(1)?[0];
        if version != ENCODING_VERSION && version != ENCODING_VERSION_1 {
            return Err(DecodeError::UnknownOpcode {
                opcode: i32::from(version),
            });
        }
        let session_id = i64::read_from(reader)?;
        let cxid = i32::read_from(reader)?;
        let time_ms = i64::read_from(reader)?;
        let owner = if version == ENCODING_VERSION_1 {
            0
        } else {
            i64::read_from(reader)? as u64
        };
        let op = match reader.take(1)?[0] {
            TAG_CREATE_SESSION => CommandOp::CreateSession {
                timeout_ms: i32::read_from(reader)?,
                password: Option::<Vec<u8>>::read_from(reader)?.unwrap_or_default(),
            },
            TAG_CLOSE_SESSION => CommandOp::CloseSession,
            TAG_WRITE => {
                let identities = Vec::<Id>::read_from(reader)?;
                let opcode = i32::read_from(reader)?;
                let body = reader.take(reader.remaining())?;
                CommandOp::Write {
                    request: Request::decode(opcode, body)?,
                    identities,
                }
            }
            TAG_REAP => CommandOp::Reap {
                path: String::read_from(reader)?,
                unchanged_since: None,
            },
            TAG_REAP_UNCHANGED => CommandOp::Reap {
                path: String::read_from(reader)?,
                unchanged_since: Some(Zxid::read_from(reader)?),
            },
            TAG_TOUCH => CommandOp::Touch {
                sessions: Vec::<i64>::read_from(reader)?
                    .into_iter()
                    .map(SessionSeen::just_now)
                    .collect(),
            },
            TAG_TOUCH_SEEN => CommandOp::Touch {
                sessions: Vec::<SessionSeen>::read_from(reader)?,
            },
            TAG_EXPIRE => CommandOp::Expire {
                unless_touched_after: i64::read_from(reader)?,
            },
            TAG_ATTACH => CommandOp::Attach {
                owner: i64::read_from(reader)? as u64,
                password: Option::<Vec<u8>>::read_from(reader)?.unwrap_or_default(),
            },
            tag => {
                return Err(DecodeError::UnknownOpcode {
                    opcode: i32::from(tag),
                })
            }
        };
        reader.finish()?;
        Ok(Command {
            session_id,
            cxid,
            time_ms,
            owner,
            op,
        })
    }
}
