"""End-to-end: `swiftplex-chat` started with SimpleX CLI's command line, as bot guides and
third-party SDKs start `simplex-chat`, and driven like such an SDK drives it.

Starts a real swiftplex-relay and `swiftplex-chat -p 0 --create-bot-display-name PyBot -d DIR/bot
-s RELAY` with standard input at /dev/null (as a service or `nohup` runs it); checks that it keeps
serving after the end of input, that the databases are SimpleX's files at the prefix, and sends
the terminal's own commands over the WebSocket API with the `websockets` package: `/u` (a bot
profile), `/ad` (the address made), `/sa` (the same address shown), `/c` (an invitation); then an
unsupported SimpleX flag (`--socks-proxy`) is refused with exit status 64, naming it.

Run by `make python-test` with SIMPLEX_LIBS_DIR set to the build directory. Prints
`python-cli-compat: N passed, 0 failed` and exits non-zero on the first failure.
"""

import os
import subprocess
import tempfile

from harness import BIN, check, run, start_relay, started, stop
from test_ws_api import Lines, Session


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-cli-compat-")
    relay, relay_address = start_relay(os.path.join(work, "relay"))
    chat = os.path.join(BIN, "swiftplex-chat")
    prefix = os.path.join(work, "bot")

    bot = subprocess.Popen([chat, "-p", "0", "--create-bot-display-name", "PyBot", "-d", prefix, "-s", relay_address],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    started.append(bot)
    err = Lines(bot.stderr)
    port = int(err.wait_for(r"WebSocket API listening on 127\.0\.0\.1:(\d+)", "the WebSocket API listens").group(1))
    err.wait_for(r"standard input ended; serving until SIGTERM or SIGINT", "the end of input is noticed and serving goes on")
    check(bot.poll() is None, "with stdin at /dev/null the process keeps running")
    check(os.path.exists(prefix + "_chat.db") and os.path.exists(prefix + "_agent.db"),
          "-d PREFIX keeps the data in PREFIX_chat.db and PREFIX_agent.db")

    s = Session(f"ws://127.0.0.1:{port}/")
    user = s.command("/u")
    check(user.get("type") == "activeUser" and user["user"]["profile"]["displayName"] == "PyBot", "/u answers activeUser with the bot's name")
    check(user["user"]["profile"].get("peerType") == "bot", "--create-bot-display-name makes a bot profile (peerType bot)")

    created = s.command("/ad")
    check(created.get("type") == "userContactLinkCreated", f"/ad creates the address ({created.get('type')})")
    link = created["connLinkContact"]["connFullLink"]
    shown = s.command("/sa")
    check(shown.get("type") == "userContactLink" and shown["contactLink"]["connLinkContact"]["connFullLink"] == link,
          "/sa shows the same address")
    again = s.command("/ad")
    check(again.get("type") == "chatCmdError", "a second /ad is refused with a typed error")

    invitation = s.command("/c")
    check(invitation.get("type") == "invitation" and invitation["connLinkInvitation"]["connFullLink"], "/c makes a one-time invitation")
    s.ws.close()

    stop(bot)
    check(bot.returncode == 0, f"SIGTERM stops it cleanly (status {bot.returncode})")

    refused = subprocess.run([chat, "-d", os.path.join(work, "other"), "--socks-proxy=127.0.0.1:9050"], capture_output=True, text=True)
    check(refused.returncode == 64 and "--socks-proxy is SimpleX CLI's flag but is not supported here" in refused.stderr,
          f"an unsupported SimpleX flag exits 64 naming it ({refused.stderr.strip()})")
    stop(relay)


if __name__ == "__main__":
    run("python-cli-compat", main)
