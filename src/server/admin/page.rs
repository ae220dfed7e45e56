//! The status page at `GET /`: one self-contained HTML document (its CSS and JavaScript
//! inline, embedded in the binary) that reads the JSON views of [`super::api`] and redraws
//! itself every two seconds. It loads nothing from anywhere else, so it works on a network
//! with no internet, and its Content-Security-Policy forbids it to: the browser refuses any
//! script, style, font or image from elsewhere, and any request but to this beacon.

use axum::http::header;
use axum::response::{IntoResponse, Response};

/// The page, as written in `status.html`.
const PAGE: &str = include_str!("status.html");

const POLICY: &str = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                      img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

pub(super) async fn serve() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::PAGE;

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for outside in ["http://", "https://", "//cdn", "@import", "src=\""] {
            assert!(
                !PAGE.contains(outside),
                "the status page refers to something outside itself: {outside}"
            );
        }
    }

    #[test]
    fn the_page_reads_only_views_the_api_serves() {
        let api = include_str!("api.rs");
        let served: Vec<&str> = crate::machines::Dispatch::views()
            .iter()
            .map(|v| v.path)
            .chain(["/v1/beacon", "/v1/leaders"])
            .collect();
        let mut rest = PAGE;
        let mut seen = 0;
        while let Some(at) = rest.find("'/v1/") {
            let path = &rest[at + 1..];
            let path = &path[..path.find(['\'', '?']).unwrap()];
            assert!(
                served.contains(&path),
                "the page reads {path}, which nothing serves"
            );
            assert!(
                api.contains(&format!("`GET {path}")),
                "the page reads {path}, which api.rs does not mention"
            );
            seen += 1;
            rest = &rest[at + 1..];
        }
        assert!(seen >= 7, "the page reads {seen} views");
    }
}
