//! Log commands: what a server accepted from a client, stamped with session, cxid and time.
//! Their encoding is the log entry, so it is versioned and decoding never trusts its input.

use zoolog_proto::{DecodeError, Id, Jute, Reader, Request};

/// The first byte of every encoded command; bump it when the layout changes.
const ENCODING_VERSION: u8 = 1;

/// A command in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub session_id: i64,
    pub cxid: i32,
    /// Wall-clock time stamped by the accepting server: the ctime/mtime of what this creates.
    pub time_ms: i64,
    pub op: CommandOp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandOp {
    /// Opens a session. Its id is assigned by apply, `(server_id << 56) | zxid`, unique forever
    /// because zxids are; the proposer only chooses the password.
    CreateSession { timeout_ms: i32, password: Vec<u8> },
    /// Explicit close or expiry: deletes the session's ephemerals. Unknown session: no-op.
    CloseSession,
    /// A client write (create*, delete, setData, setACL, multi) with the caller's identities at
    /// submit time, for ACL checks and `auth` expansion.
    Write {
        request: Request,
        identities: Vec<Id>,
    },
    /// Container/TTL reaper: deletes `path` only if, at this command's time, it still qualifies.
    Reap { path: String },
}

const TAG_CREATE_SESSION: u8 = 1;
const TAG_CLOSE_SESSION: u8 = 2;
const TAG_WRITE: u8 = 3;
const TAG_REAP: u8 = 4;

impl Command {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(ENCODING_VERSION);
        self.session_id.write_to(&mut out);
        self.cxid.write_to(&mut out);
        self.time_ms.write_to(&mut out);
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
            CommandOp::Reap { path } => {
                out.push(TAG_REAP);
                path.write_to(&mut out);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, DecodeError> {
        let reader = &mut Reader::new(bytes);
        let version = reader.take(1)?[0];
        if version != ENCODING_VERSION {
            return Err(DecodeError::UnknownOpcode {
                opcode: i32::from(version),
            });
        }
        let session_id = i64::read_from(reader)?;
        let cxid = i32::read_from(reader)?;
        let time_ms = i64::read_from(reader)?;
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
            op,
        })
    }
}
