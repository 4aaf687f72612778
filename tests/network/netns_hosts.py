"""Machines made of Linux network namespaces, for the network tests and benchmarks.

Each host is a namespace with eth0 (a veth) on a bridge that lives in a
namespace of its own, so that nothing changes in the namespace the caller
runs in. Addresses are the caller's (10.x, private to these namespaces);
every namespace made is removed on exit, links and addresses with it.

    with NamespaceHosts({"a": "10.77.0.1", "t": "10.77.0.2"}) as hosts:
        subprocess.run(hosts.exec_prefix("a") + ["some-server", ...])
        hosts.set_link("a", up=False)  # pull host a's cable

Needs root (CAP_NET_ADMIN) and `ip`: check usable() first.
"""
import os
import shutil
import subprocess


def ip(*args, check=True):
    """Runs `ip ARGS`; raises CalledProcessError when check and it fails."""
    # Generous: on a busy machine another process's namespace teardown can
    # hold the kernel's network lock for many seconds (once seen: over 20).
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=60)


def usable():
    """Whether namespaces can be made here: root, `ip`, and a namespace made and removed."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"tcprobe{os.getpid() % 100000}"
    if ip("netns", "add", probe, check=False).returncode != 0:
        return False
    ip("netns", "del", probe, check=False)
    return True


class NamespaceHosts:
    """Hosts (name -> IPv4 address, /24) on one bridge; a context manager."""

    def __init__(self, addresses, prefix="tc"):
        # The pid in the names lets runs side by side (or a crashed run's
        # leftovers) coexist.
        self.addresses = dict(addresses)
        self._tag = f"{os.getpid() % 100000}"
        self._prefix = prefix
        self.bridge_ns = self.ns("br")
        self._made = []

    def ns(self, host):
        """The namespace name of host."""
        return f"{self._prefix}{host}{self._tag}"

    def exec_prefix(self, host):
        """The argv prefix that runs a command in host (`ip netns exec` execs it: the pid is the command's)."""
        return ["ip", "netns", "exec", self.ns(host)]

    def set_link(self, host, up):
        """Takes host's bridge port up or down: its cable plugged in or pulled."""
        ip("-n", self.bridge_ns, "link", "set", f"p{host}", "up" if up else "down")

    def __enter__(self):
        try:
            for name in [self.bridge_ns] + [self.ns(h) for h in self.addresses]:
                ip("netns", "add", name)
                self._made.append(name)
            ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
            ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            for host, address in self.addresses.items():
                port = f"p{host}"
                ip("-n", self.bridge_ns, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
                   self.ns(host))
                ip("-n", self.bridge_ns, "link", "set", port, "master", "br0", "up")
                ip("-n", self.ns(host), "addr", "add", f"{address}/24", "dev", "eth0")
                ip("-n", self.ns(host), "link", "set", "eth0", "up")
                ip("-n", self.ns(host), "link", "set", "lo", "up")
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc):
        self.remove()
        return False

    def remove(self):
        """Removes every namespace made (their veths and addresses go with them)."""
        while self._made:
            ip("netns", "del", self._made.pop(), check=False)
