//! The byte streams beacon speaks over: plain TCP, or TLS (rustls) when `tls` is
//! configured. Beacons, peers and clients alike read and write a [`Stream`]; what differs is
//! only how it was opened ([`tls`]).

mod codec;
pub mod tls;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// One connection, plain or under TLS.
#[derive(Debug)]
pub enum Stream {
    Plain(TcpStream),
    /// Accepted by a beacon.
    Accepted(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// Dialled by a beacon or a client.
    Dialled(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    pub fn is_tls(&self) -> bool {
        !matches!(self, Stream::Plain(_))
    }

    /// Whether the other end asked for HTTP/2 in its TLS handshake (ALPN `h2`): a gRPC
    /// client.
    pub fn negotiated_h2(&self) -> bool {
        match self {
            Stream::Accepted(s) => s.get_ref().1.alpn_protocol() == Some(b"h2"),
            _ => false,
        }
    }

    /// Whether the other end presented a certificate that this beacon's CA verified
    /// (accepted connections only; rustls refuses any certificate that does not verify).
    pub fn peer_verified(&self) -> bool {
        match self {
            Stream::Accepted(s) => s.get_ref().1.peer_certificates().is_some(),
            _ => false,
        }
    }

    /// The verified certificate the other end presented (its leaf), if any.
    pub fn peer_certificate(&self) -> Option<rustls::pki_types::CertificateDer<'static>> {
        let Stream::Accepted(s) = self else {
            return None;
        };
        Some(
            s.get_ref()
                .1
                .peer_certificates()?
                .first()?
                .clone()
                .into_owned(),
        )
    }

    /// The name on the verified certificate the other end presented: its subject's common
    /// name, or else its first DNS name. Only a beacon accepting connections asks.
    #[cfg(feature = "server")]
    pub fn peer_certificate_name(&self) -> Option<String> {
        let Stream::Accepted(s) = self else {
            return None;
        };
        let der = s.get_ref().1.peer_certificates()?.first()?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
        if let Some(cn) = cert.subject().iter_common_name().next()
            && let Ok(name) = cn.as_str()
        {
            return Some(name.to_owned());
        }
        let sans = cert.subject_alternative_name().ok()??;
        sans.value.general_names.iter().find_map(|n| match n {
            x509_parser::extensions::GeneralName::DNSName(d) => Some((*d).to_owned()),
            _ => None,
        })
    }

    /// Moves the socket to the I/O driver of the runtime this is called on. A socket is
    /// watched by the runtime where it was opened: a connection handed to another runtime (a
    /// beacon's links, opened on the edges and served on the core's own thread) would
    /// otherwise be woken through the first one's threads. What was read and buffered, the
    /// TLS session included, stays as it is. Must be called within a Tokio runtime.
    pub fn rebind(&mut self) -> io::Result<()> {
        let tcp = match self {
            Stream::Plain(s) => s,
            Stream::Accepted(s) => s.get_mut().0,
            Stream::Dialled(s) => s.get_mut().0,
        };
        rebind(tcp)
    }
}

/// [`Stream::rebind`] for one socket: the socket is opened a second time (a duplicated
/// descriptor) on this runtime, and the first registration dropped.
#[cfg(unix)]
fn rebind(tcp: &mut TcpStream) -> io::Result<()> {
    use std::os::fd::AsFd;
    let again = std::net::TcpStream::from(tcp.as_fd().try_clone_to_owned()?);
    *tcp = TcpStream::from_std(again)?;
    Ok(())
}

/// Elsewhere the socket stays where it is: it still works, through the other runtime.
#[cfg(not(unix))]
fn rebind(_: &mut TcpStream) -> io::Result<()> {
    Ok(())
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Accepted(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Dialled(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Accepted(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Dialled(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Accepted(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Dialled(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Accepted(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Dialled(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}
