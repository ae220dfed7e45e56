//! Network namespaces for the "cut" fault: each member of a cluster runs in a namespace of its
//! own, joined to the benchmark (in the root namespace) by a veth pair on a bridge. Cutting a
//! member takes its veth down: nothing is closed and nothing is refused, its peers and
//! clients see silence, as when a cable is pulled or a switch port dies.
//!
//! Needs root (CAP_NET_ADMIN) and iproute2's `ip`. Everything made is named after this
//! process (`bb<pid>...`, `beacon-bench-<pid>-<i>`) and removed when the [`Net`] is dropped;
//! what a killed run left behind is removed by the next.

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use anyhow::{Context, bail};

const NS_PREFIX: &str = "beacon-bench-";

/// A bridge in the root namespace and one namespace per member.
pub struct Net {
    bridge: String,
    hosts: Vec<Host>,
}

struct Host {
    ns: String,
    /// The root namespace's end of the member's veth pair (on the bridge).
    veth: String,
    ip: Ipv4Addr,
}

/// Runs `ip args...`, failing with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (Debian package iproute2)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Removes namespaces and bridges of earlier runs whose process is gone.
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(NS_PREFIX) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or_default();
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
            let _ = ip(&["link", "del", &format!("bb{pid}")]);
        }
    }
}

impl Net {
    /// `n` namespaces on a bridge of their own, addresses 10.213.X.2 upwards (X from this
    /// process's id); the root namespace is 10.213.X.1.
    pub fn create(n: usize) -> anyhow::Result<Net> {
        remove_stale();
        let pid = std::process::id();
        let subnet = (pid % 250) as u8;
        let mut net = Net {
            bridge: format!("bb{pid}"),
            hosts: Vec::new(),
        };
        ip(&["link", "add", &net.bridge, "type", "bridge"])?;
        ip(&[
            "addr",
            "add",
            &format!("10.213.{subnet}.1/24"),
            "dev",
            &net.bridge,
        ])?;
        ip(&["link", "set", &net.bridge, "up"])?;
        for i in 0..n {
            // Recorded first, so that a failure below still removes what was made.
            net.hosts.push(Host {
                ns: format!("{NS_PREFIX}{pid}-{i}"),
                veth: format!("bb{pid}v{i}"),
                ip: Ipv4Addr::new(10, 213, subnet, 2 + i as u8),
            });
            let host = net.hosts.last().expect("just pushed");
            ip(&["netns", "add", &host.ns])?;
            ip(&[
                "link", "add", &host.veth, "type", "veth", "peer", "name", "eth0", "netns",
                &host.ns,
            ])?;
            ip(&["link", "set", &host.veth, "master", &net.bridge])?;
            ip(&["link", "set", &host.veth, "up"])?;
            ip(&["-n", &host.ns, "link", "set", "lo", "up"])?;
            let cidr = format!("{}/24", host.ip);
            ip(&["-n", &host.ns, "addr", "add", &cidr, "dev", "eth0"])?;
            ip(&["-n", &host.ns, "link", "set", "eth0", "up"])?;
        }
        Ok(net)
    }

    /// Member `i`'s address.
    pub fn ip(&self, i: usize) -> IpAddr {
        IpAddr::V4(self.hosts[i].ip)
    }

    /// The command line that runs `program args...` in member `i`'s namespace (`ip netns
    /// exec` execs the program: its pid is the member's, for SIGSTOP and SIGKILL).
    pub fn wrap(&self, i: usize, program: &str, args: Vec<String>) -> (String, Vec<String>) {
        let mut all = vec![
            "netns".to_owned(),
            "exec".to_owned(),
            self.hosts[i].ns.clone(),
            program.to_owned(),
        ];
        all.extend(args);
        ("ip".to_owned(), all)
    }

    /// Cuts member `i` off: every packet to or from it is lost.
    pub fn cut(&self, i: usize) -> anyhow::Result<()> {
        ip(&["link", "set", &self.hosts[i].veth, "down"])
    }

    /// Reconnects member `i`.
    pub fn heal(&self, i: usize) -> anyhow::Result<()> {
        ip(&["link", "set", &self.hosts[i].veth, "up"])
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for h in &self.hosts {
            let _ = ip(&["netns", "del", &h.ns]);
            let _ = ip(&["link", "del", &h.veth]);
        }
        let _ = ip(&["link", "del", &self.bridge]);
    }
}
