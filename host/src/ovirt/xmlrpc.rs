//! XML-RPC on the wire: a call's body read into a method name and its
//! parameters, and an answer or a fault written back. The values are
//! `dxr`'s; this module adds what a server facing the network needs
//! around it: a nesting limit checked before `dxr`'s recursive
//! deserializer runs, errors that say what is wrong (and never echo the
//! body), and the fault codes XML-RPC servers agree on.

use dxr::{Fault, FaultResponse, MethodCall, MethodResponse, Value};
use quick_xml::events::Event;

/// Deepest element nesting a call may have. oVirt's deepest call
/// (`runCostFunctions`: methodCall, params, param, value, array, data,
/// value, array, data, value, string) nests eleven elements; 64 leaves
/// room for any honest client while keeping a crafted body from
/// recursing through `dxr`'s deserializer until the stack runs out.
pub const MAX_XML_DEPTH: usize = 64;

/// Fault codes of the XML-RPC "specification for fault code
/// interoperability", which Python's `xmlrpc.server` and Apache XML-RPC
/// (oVirt's engine) both use.
pub mod code {
    /// The body is not well-formed XML (or not UTF-8).
    pub const PARSE_ERROR: i32 = -32700;
    /// Well-formed XML, but not an XML-RPC `methodCall` (or too deep, or
    /// too large).
    pub const INVALID_REQUEST: i32 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// The method exists; its parameters are not what it takes.
    pub const INVALID_PARAMS: i32 = -32602;
    /// The server failed to answer a well-formed call.
    pub const INTERNAL_ERROR: i32 = -32603;
}

/// Why a body is not an XML-RPC call the server can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("the body is not UTF-8 (XML-RPC is UTF-8 text)")]
    NotUtf8,
    #[error("the body is not well-formed XML: {0}")]
    NotXml(String),
    #[error("the body nests elements more than {MAX_XML_DEPTH} deep")]
    TooDeep,
    #[error(
        "the body is not an XML-RPC call: expected <methodCall> with a <methodName> and \
         <params> of <param><value>s"
    )]
    NotACall,
}

impl CallError {
    /// The fault code this error is answered with.
    pub fn code(&self) -> i32 {
        match self {
            CallError::NotUtf8 | CallError::NotXml(_) => code::PARSE_ERROR,
            CallError::TooDeep | CallError::NotACall => code::INVALID_REQUEST,
        }
    }
}

/// A call read from its body: the method's name and its parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub method: String,
    pub params: Vec<Value>,
}

/// Reads an XML-RPC `methodCall` from `body`.
pub fn parse_call(body: &[u8]) -> Result<Call, CallError> {
    let text = std::str::from_utf8(body).map_err(|_| CallError::NotUtf8)?;
    check_xml(text)?;
    let call = MethodCall::from_xml(text).map_err(|_| CallError::NotACall)?;
    Ok(Call {
        method: call.name.into_owned(),
        params: call.params,
    })
}

/// Checks that `text` is well-formed XML nested at most
/// [`MAX_XML_DEPTH`] deep, reading it once without building anything.
fn check_xml(text: &str) -> Result<(), CallError> {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut depth = 0usize;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| CallError::NotXml(format!("at byte {}: {e}", reader.error_position())))?;
        match event {
            Event::Start(_) => {
                depth += 1;
                if depth > MAX_XML_DEPTH {
                    return Err(CallError::TooDeep);
                }
            }
            Event::End(_) => depth = depth.saturating_sub(1),
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

/// The XML of a successful answer carrying `value`.
pub fn response(value: Value) -> String {
    MethodResponse { value }
        .to_xml()
        .unwrap_or_else(|e| fault(code::INTERNAL_ERROR, &format!("encoding the answer: {e}")))
}

/// The XML of a fault with `code` and `message`.
pub fn fault(code: i32, message: &str) -> String {
    let written = FaultResponse {
        fault: Fault::new(code, message.to_owned()),
    }
    .to_xml();
    // A fault holds an integer and a string, which always encode; the
    // fallback is written by hand only to keep this path free of panics.
    written.unwrap_or_else(|_| {
        format!(
            "<?xml version=\"1.0\"?><methodResponse><fault><value><struct>\
             <member><name>faultCode</name><value><int>{}</int></value></member>\
             <member><name>faultString</name><value><string>internal error</string></value></member>\
             </struct></value></fault></methodResponse>",
            code::INTERNAL_ERROR
        )
    })
}

/// A string value.
pub fn string(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

/// An integer value (`<i4>`: Apache XML-RPC reads it as `Integer`, which
/// is what oVirt's engine casts `result_code` and scores to).
pub fn int(i: i32) -> Value {
    Value::Integer(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_as_apache_xml_rpc_writes_it_is_read() {
        // Strings without a <string> element, as Apache XML-RPC (oVirt's
        // engine) writes them.
        let body = br#"<?xml version="1.0" encoding="UTF-8"?><methodCall><methodName>runFilters</methodName><params><param><value><array><data><value>Memory</value></data></array></value></param><param><value><array><data><value>11111111-1111-1111-1111-111111111111</value></data></array></value></param><param><value>33333333-3333-3333-3333-333333333333</value></param><param><value><struct/></value></param></params></methodCall>"#;
        let call = parse_call(body).expect("a call");
        assert_eq!(call.method, "runFilters");
        assert_eq!(call.params.len(), 4);
        assert_eq!(
            call.params[2],
            string("33333333-3333-3333-3333-333333333333")
        );
    }

    #[test]
    fn bad_bodies_are_told_apart() {
        assert_eq!(parse_call(&[0xff, 0xfe]), Err(CallError::NotUtf8));
        assert!(matches!(
            parse_call(b"<methodCall><methodName>x</methodName>"),
            Err(CallError::NotXml(_)) | Err(CallError::NotACall)
        ));
        assert!(matches!(
            parse_call(b"<methodCall><a></b></methodCall>"),
            Err(CallError::NotXml(_))
        ));
        assert_eq!(parse_call(b"<hello/>"), Err(CallError::NotACall));
        let deep = "<value><array><data>".repeat(100_000);
        assert_eq!(
            parse_call(format!("<methodCall>{deep}").as_bytes()),
            Err(CallError::TooDeep)
        );
    }

    #[test]
    fn faults_and_answers_are_xml_rpc() {
        let f = fault(code::METHOD_NOT_FOUND, "no method `x` <here>");
        assert!(f.contains("<fault>") && f.contains("-32601"), "{f}");
        assert!(f.contains("&lt;here&gt;"), "escaped: {f}");
        let r = response(Value::Array(vec![int(1), string("a")]));
        assert!(
            r.contains("<methodResponse>") && r.contains("<i4>1</i4>"),
            "{r}"
        );
    }
}
