//! `nebcli certs DIR`: a throw-away CA and certificates for a test cluster, so that TLS can
//! be tried in a minute. A production cluster uses certificates from its own CA.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use beacon_certs::Ca;
use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "nebcli certs",
    about = "Make a throw-away CA and certificates for a test cluster (PEM files in DIR)"
)]
struct Args {
    /// Where the files go (created if missing).
    dir: PathBuf,
    /// A beacon to make a certificate for (its IP goes in the certificate); repeat for
    /// each. Default: 127.0.0.1:16000.
    #[arg(long = "beacon", value_name = "IP:PORT")]
    beacons: Vec<SocketAddr>,
    /// A client certificate to make, named NAME (the identity `auth.certs` gives a role);
    /// repeat for each.
    #[arg(long = "client", value_name = "NAME")]
    clients: Vec<String>,
}

/// Runs `nebcli certs` with `words` (what follows `certs`); returns what to print.
pub fn run(words: &[String]) -> anyhow::Result<String> {
    let args =
        Args::try_parse_from(std::iter::once("certs".to_owned()).chain(words.iter().cloned()))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("create {}", args.dir.display()))?;
    let dir = args.dir.canonicalize().context("the directory")?;
    let ca = Ca::new(&dir, "ca")?;
    ca.write_key(&dir.join("ca.key"))?;
    let beacons = if args.beacons.is_empty() {
        vec![SocketAddr::from(([127, 0, 0, 1], 16000))]
    } else {
        args.beacons
    };
    let mut out = format!(
        "CA: {} (key {})\n",
        ca.pem.display(),
        dir.join("ca.key").display()
    );
    for b in &beacons {
        let name = format!("beacon-{}_{}", b.ip(), b.port());
        let issued = ca.issue_for(&dir, &name, &[b.ip().to_string()])?;
        let keys =
            serde_json::json!({ "tls": { "cert": issued.cert, "key": issued.key, "ca": ca.pem } });
        out.push_str(&format!("beacon {b}: add to its config: {keys}\n"));
    }
    for c in &args.clients {
        let issued = ca.issue_client(&dir, c)?;
        out.push_str(&format!(
            "client `{c}`: nebcli --cacert {} --cert {} --key {} ...\n",
            ca.pem.display(),
            issued.cert.display(),
            issued.key.display()
        ));
    }
    out.push_str(&format!(
        "then: nebcli --cacert {} -s {} show beacon",
        ca.pem.display(),
        beacons[0]
    ));
    Ok(out)
}
