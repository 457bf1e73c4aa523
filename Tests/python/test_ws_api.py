"""End-to-end: SimpleX's WebSocket API (`simplex-chat -p PORT`) and the bot host's admin API,
spoken by plain clients: the `websockets` package and urllib.

Starts a real swiftplex-relay, two `swiftplex-chat -p 0` processes (one with a token, one on
loopback without), and a `swiftplex run` host with `ws_api:` and `admin:`; sends commands with
corrIds and matches the responses, sees a contact connect as an event frame, sends a bad frame
and keeps going, is refused with 401 for a wrong token, and uses the admin API with its token
(and after `swiftplex admin-token --rotate`, the old token no more); then `swiftplex backup` of
the running host and `swiftplex restore` (refused while it runs and without --replace).

Run by `make python-test` with SIMPLEX_LIBS_DIR set to the build directory. Prints
`python-ws: N passed, 0 failed` and exits non-zero on the first failure.
"""

import json
import os
import queue
import re
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request

from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect
from harness import BIN, TIMEOUT, check, run, started, stop

TOKEN = "python-ws-token-0123456789"


class Lines:
    """A process stream's lines, read on a thread; `wait_for` blocks until one matches."""

    def __init__(self, stream):
        self.queue = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)

    def wait_for(self, pattern, what):
        for line in self.seen:  # a line that came while waiting for another
            m = re.search(pattern, line)
            if m:
                return m
        while True:
            try:
                line = self.queue.get(timeout=TIMEOUT)
            except queue.Empty:
                line = None
            if line is None:
                check(False, f"{what} (output so far: {''.join(self.seen)!r})")
            self.seen.append(line)
            m = re.search(pattern, line)
            if m:
                return m


def start_chat(data_dir, relay, name, token=None):
    args = [os.path.join(BIN, "swiftplex-chat"), "--data-dir", data_dir, "--server", relay, "--name", name, "-p", "0"]
    if token:
        args += ["--ws-token", token]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started.append(p)
    port = int(Lines(p.stderr).wait_for(r"WebSocket API listening on 127\.0\.0\.1:(\d+)", f"{name}: the WebSocket API listens").group(1))
    return p, port


class Session:
    """One WebSocket API connection: commands by corrId, events kept in order."""

    def __init__(self, url, headers=None):
        self.ws = connect(url, additional_headers=headers or {}, open_timeout=TIMEOUT)
        self.events = []
        self.answers = {}
        self.next_id = 0

    def frame(self):
        msg = json.loads(self.ws.recv(timeout=TIMEOUT))
        if msg.get("corrId"):
            self.answers[msg["corrId"]] = msg["resp"]
        else:
            self.events.append(msg["resp"])
        return msg

    def send_raw(self, text):
        self.ws.send(text)

    def command(self, cmd):
        self.next_id += 1
        corr = str(self.next_id)
        self.ws.send(json.dumps({"corrId": corr, "cmd": cmd}))
        while corr not in self.answers:
            self.frame()
        return self.answers.pop(corr)

    def event(self, type_):
        while True:
            for i, e in enumerate(self.events):
                if e.get("type") == type_:
                    return self.events.pop(i)
            self.frame()


def http(method, url, token=None, body=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode())
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-ws-api-")
    relay = subprocess.Popen([os.path.join(BIN, "swiftplex-relay"), "--data-dir", os.path.join(work, "relay"),
                              "--listen", "127.0.0.1:0", "--log-level", "warning"], stdout=subprocess.PIPE, text=True)
    started.append(relay)
    relay_address = relay.stdout.readline().strip()
    check(relay_address.startswith("smp://"), "the relay printed its address")

    bot, bot_port = start_chat(os.path.join(work, "bot"), relay_address, "wsbot", token=TOKEN)
    peer, peer_port = start_chat(os.path.join(work, "peer"), relay_address, "wspeer")

    # A wrong token is refused with 401 before the upgrade; the right one in the query works too.
    try:
        connect(f"ws://127.0.0.1:{bot_port}/", additional_headers={"Authorization": "Bearer wrong"}, open_timeout=TIMEOUT)
        check(False, "a wrong token is refused")
    except InvalidStatus as e:
        check(e.response.status_code == 401, "a wrong token is refused with 401")
    query_session = Session(f"ws://127.0.0.1:{bot_port}/?token={TOKEN}")
    check(query_session.command("/user").get("type") == "activeUser", "?token= authenticates clients that cannot set headers")
    query_session.ws.close()

    s = Session(f"ws://127.0.0.1:{bot_port}/", {"Authorization": f"Bearer {TOKEN}"})
    user = s.command("/user")
    check(user.get("type") == "activeUser", "a command is answered under its corrId")
    user_id = user["user"]["userId"]
    invitation = s.command(f"/_connect {user_id}")
    link = invitation.get("connLinkInvitation", {}).get("connFullLink")
    check(bool(link), "an invitation link comes back")

    p = Session(f"ws://127.0.0.1:{peer_port}/")  # loopback, no token configured
    peer_user = p.command("/user")["user"]["userId"]
    joined = p.command(f"/_connect {peer_user} {link}")
    check(joined.get("type") != "chatCmdError", "the peer joins through its own WebSocket API")

    connected = s.event("contactConnected")
    check(connected["contact"]["profile"]["displayName"] == "wspeer", "the contact connecting arrives as an event frame (no corrId)")
    contact_id = connected["contact"]["contactId"]

    s.send_raw("this is not json")
    while not any(e.get("type") == "chatCmdError" for e in s.events):
        s.frame()
    check(True, "a malformed frame is answered with a chatCmdError frame")
    s.send_raw(json.dumps({"corrId": "x1", "cmd": 42}))
    while "x1" not in s.answers:
        s.frame()
    check(s.answers.pop("x1").get("type") == "chatCmdError", "a frame without a command string gets a chatCmdError under its corrId")

    msgs = json.dumps([{"msgContent": {"type": "text", "text": "hello over the WebSocket API"}}])
    sent = s.command(f"/_send @{contact_id} json {msgs}")
    check(sent.get("type") == "newChatItems", "the connection still serves after bad frames: a message is sent")
    item = p.event("newChatItems")
    check(item["chatItems"][0]["chatItem"]["content"]["msgContent"]["text"] == "hello over the WebSocket API",
          "the peer receives it as an event")
    s.ws.close()
    p.ws.close()
    for proc in (bot, peer):
        proc.stdin.close()
        stop(proc)

    # The bot host: ws_api and admin in its YAML, the admin token from `swiftplex admin-token`.
    config = os.path.join(work, "host.yaml")
    with open(config, "w") as f:
        f.write(f"""data_dir: {os.path.join(work, "host")}
bot:
  display_name: Admin Bot
relays: ["{relay_address}"]
address:
  print_qr: false
ws_api:
  listen: 127.0.0.1:0
  token: {TOKEN}
admin:
  listen: 127.0.0.1:0
""")
    swiftplex = os.path.join(BIN, "swiftplex")
    host = subprocess.Popen([swiftplex, "run", "--config", config, "--log-level", "warning"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    started.append(host)
    out = Lines(host.stdout)
    admin_port = int(out.wait_for(r"admin API: http://127\.0\.0\.1:(\d+)", "the host prints its admin API address").group(1))
    base = f"http://127.0.0.1:{admin_port}"
    token = subprocess.run([swiftplex, "admin-token", "--config", config], capture_output=True, text=True, check=True).stdout.strip()
    mode = os.stat(os.path.join(work, "host", "admin.token")).st_mode & 0o777
    check(len(token) == 64 and mode == 0o600, "swiftplex admin-token prints the token, stored 0600")

    check(http("GET", f"{base}/healthz")[0] == 200, "/healthz needs no token")
    status, body = http("GET", f"{base}/api/status")
    check(status == 401 and body["error"]["type"] == "unauthorized", "no token: 401 with a typed error")
    status, body = http("GET", f"{base}/api/status", token)
    check(status == 200 and body["engineRunning"] is True, "the status with the token")
    status, body = http("POST", f"{base}/api/command", token, {"cmd": "/user"})
    check(status == 200 and body["type"] == "activeUser", "POST /api/command answers as chat_send_cmd does")
    status, body = http("GET", f"{base}/api/openapi.json", token)
    check(status == 200 and "/api/status" in body["paths"], "the OpenAPI document is served")

    # Ready once the engine runs with its relay connected (the host says so on stdout); then
    # Prometheus metrics, with the token only.
    out.wait_for(r"^ready: 1 relay\(s\) connected$", "the host prints that it is ready")
    status, body = http("GET", f"{base}/readyz")
    check(status == 200 and body == {"ready": True}, "/readyz without the token: ready, naming nothing")
    status, body = http("GET", f"{base}/readyz", token)
    check(status == 200 and body["relaysConnected"] == 1, "/readyz with the token: one relay connected")
    check(http("GET", f"{base}/metrics")[0] == 401, "/metrics needs the token")
    with urllib.request.urlopen(urllib.request.Request(f"{base}/metrics", headers={"Authorization": f"Bearer {token}"}),
                                timeout=TIMEOUT) as r:
        metrics = r.read().decode()
        check(r.status == 200 and r.headers["Content-Type"].startswith("text/plain"), "/metrics answers in Prometheus' text format")
    check(re.search(r'^swiftplex_engine_relays_connected\{bot="bot"\} 1(\.0)?$', metrics, re.M) and re.search(r"^process_open_fds \d", metrics, re.M),
          "/metrics counts the relay connected and the process' descriptors")

    rotated = subprocess.run([swiftplex, "admin-token", "--config", config, "--rotate"], capture_output=True, text=True, check=True).stdout.strip()
    check(rotated != token and http("GET", f"{base}/api/status", token)[0] == 401, "a rotated token replaces the old one at once")
    check(http("GET", f"{base}/api/status", rotated)[0] == 200, "the new token works")

    # The host's ws_api speaks the same protocol.
    ws_port = int(out.wait_for(r"WebSocket API: ws://127\.0\.0\.1:(\d+)", "the host prints its WebSocket API address").group(1))
    h = Session(f"ws://127.0.0.1:{ws_port}/", {"Authorization": f"Bearer {TOKEN}"})
    check(h.command("/user")["user"]["profile"]["displayName"] == "Admin Bot", "the host's WebSocket API answers")
    h.ws.close()

    # swiftplex backup while the host runs; restore refuses the running bot's data, then works once it stopped.
    archive = os.path.join(work, "host-backup.zip")
    made = subprocess.run([swiftplex, "backup", "--config", config, "--out", archive], capture_output=True, text=True)
    check(made.returncode == 0 and os.stat(archive).st_mode & 0o777 == 0o600, f"swiftplex backup writes a 0600 archive while the bot runs ({made.stderr.strip()})")
    refused = subprocess.run([swiftplex, "restore", archive, "--config", config, "--replace"], capture_output=True, text=True)
    check(refused.returncode != 0 and "running bot" in refused.stderr, "swiftplex restore refuses a running bot's data directory")

    stop(host)
    kept = subprocess.run([swiftplex, "restore", archive, "--config", config], capture_output=True, text=True)
    check(kept.returncode != 0 and "--replace" in kept.stderr, "swiftplex restore does not overwrite a bot's data without --replace")
    restored = subprocess.run([swiftplex, "restore", archive, "--config", config, "--replace"], capture_output=True, text=True)
    check(restored.returncode == 0 and "restored:" in restored.stdout, f"swiftplex restore --replace once the bot stopped ({restored.stderr.strip()})")
    stop(relay)


if __name__ == "__main__":
    run("python-ws", main)
