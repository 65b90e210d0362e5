//! Server replies: the body records by opcode, multi results, and whole reply frames.

use crate::codes::{ErrorCode, OpCode};
use crate::jute::{Jute, Reader};
use crate::records::*;
use crate::DecodeError;

/// The body of a successful reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// No body: delete, ping, auth, setWatches, checkWatches, removeWatches, closeSession…
    Empty,
    Create(CreateResponse),
    Create2(Create2Response),
    /// exists, setData, setACL.
    Stat(StatResponse),
    /// getData and reconfig.
    GetData(GetDataResponse),
    GetAcl(GetAclResponse),
    GetChildren(GetChildrenResponse),
    GetChildren2(GetChildren2Response),
    Sync(PathRequest),
    Multi(Vec<MultiResult>),
    GetAllChildrenNumber(GetAllChildrenNumberResponse),
    GetEphemerals(GetEphemeralsResponse),
    WhoAmI(WhoAmIResponse),
    /// addWatch replies with a 4-byte ErrorResponse{0}; the Java client requires it.
    AddWatch(ErrorResponse),
    Sasl(SaslToken),
}

/// One entry of a multi or multiRead reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    Create(CreateResponse),
    /// create2, createContainer and createTTL all report as type 15.
    Create2(Create2Response),
    Delete,
    SetData(StatResponse),
    Check,
    GetChildren(GetChildrenResponse),
    GetData(GetDataResponse),
    /// A failed or rolled-back op; `Ok` marks an op rolled back because a later one failed.
    Error(ErrorCode),
}

impl MultiResult {
    fn opcode(&self) -> i32 {
        match self {
            MultiResult::Create(_) => OpCode::Create.code(),
            MultiResult::Create2(_) => OpCode::Create2.code(),
            MultiResult::Delete => OpCode::Delete.code(),
            MultiResult::SetData(_) => OpCode::SetData.code(),
            MultiResult::Check => OpCode::Check.code(),
            MultiResult::GetChildren(_) => OpCode::GetChildren.code(),
            MultiResult::GetData(_) => OpCode::GetData.code(),
            MultiResult::Error(_) => OpCode::Error.code(),
        }
    }

    fn write_to(&self, out: &mut Vec<u8>) {
        let err = match self {
            MultiResult::Error(code) => code.code(),
            _ => 0,
        };
        MultiHeader {
            opcode: self.opcode(),
            done: false,
            err,
        }
        .write_to(out);
        match self {
            MultiResult::Create(r) => r.write_to(out),
            MultiResult::Create2(r) => r.write_to(out),
            MultiResult::SetData(r) => r.write_to(out),
            MultiResult::GetChildren(r) => r.write_to(out),
            MultiResult::GetData(r) => r.write_to(out),
            MultiResult::Error(code) => ErrorResponse { err: code.code() }.write_to(out),
            MultiResult::Delete | MultiResult::Check => {}
        }
    }

    fn read_from(header: &MultiHeader, reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let opcode = OpCode::from_i32(header.opcode).ok_or(DecodeError::BadMultiOp {
            opcode: header.opcode,
        })?;
        Ok(match opcode {
            OpCode::Create => MultiResult::Create(Jute::read_from(reader)?),
            OpCode::Create2 => MultiResult::Create2(Jute::read_from(reader)?),
            OpCode::Delete => MultiResult::Delete,
            OpCode::SetData => MultiResult::SetData(Jute::read_from(reader)?),
            OpCode::Check => MultiResult::Check,
            OpCode::GetChildren => MultiResult::GetChildren(Jute::read_from(reader)?),
            OpCode::GetData => MultiResult::GetData(Jute::read_from(reader)?),
            OpCode::Error => {
                let body = ErrorResponse::read_from(reader)?;
                let code = ErrorCode::from_i32(body.err)
                    .ok_or(DecodeError::UnknownErrorCode { code: body.err })?;
                MultiResult::Error(code)
            }
            _ => {
                return Err(DecodeError::BadMultiOp {
                    opcode: header.opcode,
                })
            }
        })
    }
}

impl Response {
    /// The bytes of node data the reply carries: most of a read's reply, and all of its size
    /// that varies with the node.
    pub fn data_bytes(&self) -> usize {
        let data = |reply: &GetDataResponse| reply.data.as_ref().map_or(0, |data| data.len());
        match self {
            Response::GetData(reply) => data(reply),
            Response::Multi(results) => results
                .iter()
                .map(|result| match result {
                    MultiResult::GetData(reply) => data(reply),
                    _ => 0,
                })
                .sum(),
            _ => 0,
        }
    }

    pub fn write_to(&self, out: &mut Vec<u8>) {
        match self {
            Response::Empty => {}
            Response::Create(r) => r.write_to(out),
            Response::Create2(r) => r.write_to(out),
            Response::Stat(r) => r.write_to(out),
            Response::GetData(r) => r.write_to(out),
            Response::GetAcl(r) => r.write_to(out),
            Response::GetChildren(r) => r.write_to(out),
            Response::GetChildren2(r) => r.write_to(out),
            Response::Sync(r) => r.write_to(out),
            Response::Multi(results) => {
                for result in results {
                    result.write_to(out);
                }
                MultiHeader {
                    opcode: -1,
                    done: true,
                    err: -1,
                }
                .write_to(out);
            }
            Response::GetAllChildrenNumber(r) => r.write_to(out),
            Response::GetEphemerals(r) => r.write_to(out),
            Response::WhoAmI(r) => r.write_to(out),
            Response::AddWatch(r) => r.write_to(out),
            Response::Sasl(r) => r.write_to(out),
        }
    }

    /// Decodes the body of a successful reply to a request with `opcode`.
    pub fn decode(opcode: OpCode, body: &[u8]) -> Result<Response, DecodeError> {
        let reader = &mut Reader::new(body);
        Ok(match opcode {
            OpCode::Create => Response::Create(Jute::read_from(reader)?),
            OpCode::Create2 | OpCode::CreateContainer | OpCode::CreateTtl => {
                Response::Create2(Jute::read_from(reader)?)
            }
            OpCode::Exists | OpCode::SetData | OpCode::SetAcl => {
                Response::Stat(Jute::read_from(reader)?)
            }
            OpCode::GetData | OpCode::Reconfig => Response::GetData(Jute::read_from(reader)?),
            OpCode::GetAcl => Response::GetAcl(Jute::read_from(reader)?),
            OpCode::GetChildren => Response::GetChildren(Jute::read_from(reader)?),
            OpCode::GetChildren2 => Response::GetChildren2(Jute::read_from(reader)?),
            OpCode::Sync => Response::Sync(Jute::read_from(reader)?),
            OpCode::Multi | OpCode::MultiRead => Response::Multi(read_multi_results(reader)?),
            OpCode::GetAllChildrenNumber => {
                Response::GetAllChildrenNumber(Jute::read_from(reader)?)
            }
            OpCode::GetEphemerals => Response::GetEphemerals(Jute::read_from(reader)?),
            OpCode::WhoAmI => Response::WhoAmI(Jute::read_from(reader)?),
            OpCode::AddWatch => Response::AddWatch(Jute::read_from(reader)?),
            OpCode::Sasl => Response::Sasl(Jute::read_from(reader)?),
            _ => Response::Empty,
        })
    }
}

fn read_multi_results(reader: &mut Reader<'_>) -> Result<Vec<MultiResult>, DecodeError> {
    let mut results = Vec::new();
    loop {
        let header = MultiHeader::read_from(reader)?;
        if header.done {
            return Ok(results);
        }
        results.push(MultiResult::read_from(&header, reader)?);
    }
}

/// Room for a reply's header and its fixed-size fields, to which [`Response::data_bytes`]
/// adds what varies, so that one buffer of that size takes most replies whole.
pub const REPLY_BYTES_MIN: usize = 128;

/// A whole reply frame payload (without the length prefix): header, then the body on success.
/// On error only the header is sent: clients never read a body after a non-zero err.
pub fn encode_reply(xid: i32, zxid: i64, result: Result<&Response, ErrorCode>, out: &mut Vec<u8>) {
    match result {
        Ok(response) => {
            ReplyHeader { xid, zxid, err: 0 }.write_to(out);
            response.write_to(out);
        }
        Err(code) => ReplyHeader {
            xid,
            zxid,
            err: code.code(),
        }
        .write_to(out),
    }
}

/// A watch notification frame payload.
pub fn encode_notification(zxid: i64, event: &WatcherEvent, out: &mut Vec<u8>) {
    ReplyHeader {
        xid: crate::codes::xid::NOTIFICATION,
        zxid,
        err: 0,
    }
    .write_to(out);
    event.write_to(out);
}
