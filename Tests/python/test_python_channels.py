"""Channels end to end: separate processes, the official Python library (7.0.2) on libsimplex.so.

A real swiftplex-relay process (the SMP relay every party's queues are on); two chat relays, each
a `swiftplex run` process in relay mode (`chat_relay:`) with the channel-relay plugin and its
admin API; the channel's owner, a `swiftplex run` process whose `channel` plugin (isolated in its
own child process) creates the channel with both relays and posts what its admin sends it; the admin and three subscribers are
library Clients in this process (subscribers use raw command strings — `/_connect` with the
channel link — for what the 7.0.2 library has no function for).

Checked, each by the events and output it produces (never a timed wait):
channel created and both relays active at the owner; two subscribers joined through both relays;
posts reach every subscriber exactly once, shown as the channel (`channelRcv`); relay 1 killed
with SIGKILL right after a post and more posts made while it is down, then restarted on its
data: nothing is lost; a late subscriber gets the history; with relay 2 stopped, a post still
reaches all three through the restarted relay 1; the relays' status shows per-channel counters;
the owner restarted reuses its channel and posts again; connecting to a relay address is refused
("This is a chat relay address…"); relay 1's operator leaves the channel (admin API), refuses the
owner's new invitation (`rejected`) until `/_relay allow`, then serves again: the subscribers
rejoin it and, with relay 2 stopped, a post reaches all three through relay 1 alone; a relay that
alters a post (relay 1's stored history edited while it is stopped, as its operator could): a
fourth subscriber refuses that copy by the owner's signature, counts it against relay 1
(`relayStats.rejected`) and shows relay 2's honest copy once.

Prints `python channels: N passed, 0 failed`; exits non-zero on the first failure.
"""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import urllib.request

from simplex_chat import Client, Profile
from simplex_chat.core import ChatAPIError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_bot import ProcessOutput, serve  # noqa: E402  (shared helpers)
from harness import BIN, check, run, start_relay, started, stop, db  # noqa: E402


class Host:
    """A `swiftplex run` process on a YAML file; stdout and stderr read as they arrive."""

    def __init__(self, work, name, yaml):
        self.work, self.name = work, name
        self.config = os.path.join(work, f"{name}.yaml")
        with open(self.config, "w") as f:
            f.write(yaml)
        self.start()

    def start(self):
        self.process = subprocess.Popen([os.path.join(BIN, "swiftplex"), "run", "--config", self.config],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(self.process)  # ended by the harness if the run fails
        self.out = ProcessOutput(self.process.stdout, os.path.join(self.work, f"{self.name}.out"))
        self.err = ProcessOutput(self.process.stderr, os.path.join(self.work, f"{self.name}.log"))

    def wait_out(self, pattern, timeout=90):
        return self.out.wait_for(pattern, timeout)

    def wait_log(self, pattern, timeout=90, since=0):
        return self.err.wait_for(pattern, timeout, since)

    def admin(self, path, body=None):
        """An admin API call with the token (GET, or POST with a JSON body)."""
        address = self.out.wait_for(r"admin API: http://(\S+)").group(1)
        with open(os.path.join(self.work, f"{self.name}-data", "admin.token")) as f:
            token = f.read().strip()
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"http://{address}{path}", data=data, method="GET" if data is None else "POST",
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            return json.loads(r.read())

    def status(self):
        return self.admin("/api/status")

    def command(self, cmd):
        """POST /api/command: the Chat API's answer."""
        return self.admin("/api/command", {"cmd": cmd})


def relay_yaml(name, smp, display):
    return f"""data_dir: {name}-data
log_level: info
bot:
  display_name: {display}
chat_relay: true
relays: ["{smp}"]
admin:
  listen: 127.0.0.1:0
plugins:
  - name: policy
    path: channel-relay
    config: {{max_channels: 10, max_subscribers_per_channel: 100}}
"""


def owner_yaml(smp, relay1, relay2):
    return f"""data_dir: owner-data
log_level: info
bot:
  display_name: News Desk
relays: ["{smp}"]
admin:
  listen: 127.0.0.1:0
address:
  print_qr: false
plugins:
  - name: welcome
    path: auto-accept
    config: {{welcome: "Hello"}}
  - name: news
    path: channel
    isolation: process      # post_to_channel from a child process, over its command frames
    config:
      name: Swiftplex News
      relays:
        - {{name: one, address: "{relay1}"}}
        - {{name: two, address: "{relay2}"}}
      admins: ["1:admin"]
      notice: "Only admins post."
"""


class Subscriber:
    """A library Client that joins the channel and records every channel post it gets."""

    def __init__(self, work, name):
        self.name = name
        self.client = Client(profile=Profile(display_name=name), db=db(os.path.join(work, name)))
        self.posts = []          # texts of channelRcv items, in arrival order
        self.joined = 0          # userJoinedGroup events (one per relay)
        self.changed = asyncio.Condition()
        self.client.on_event("newChatItems")(self._items)
        self.client.on_event("userJoinedGroup")(self._joined)

    async def _items(self, event):
        async with self.changed:
            for ci in event["chatItems"]:
                item = ci["chatItem"]
                if item["chatDir"]["type"] == "channelRcv":
                    self.posts.append(item["content"]["msgContent"].get("text"))
            self.changed.notify_all()

    async def _joined(self, event):
        async with self.changed:
            self.joined += 1
            self.changed.notify_all()

    async def wait(self, predicate, what, timeout=90):
        try:
            async with self.changed:
                await asyncio.wait_for(self.changed.wait_for(lambda: predicate(self)), timeout)
        except asyncio.TimeoutError:
            check(False, f"{self.name}: {what} (posts {self.posts}, joined {self.joined})")

    async def join(self, link):
        r = await self.client.api.send_chat_cmd(f"/_connect 1 {link}")
        check(r["type"] == "startedConnectionToGroup", f"{self.name} starts joining the channel ({r['type']})")
        self.group = r["groupInfo"]["groupId"]


async def channels(work, smp):
    os.chdir(work)
    relay1 = Host(work, "relay1", relay_yaml("relay1", smp, "Relay One"))
    relay2 = Host(work, "relay2", relay_yaml("relay2", smp, "Relay Two"))
    r1 = relay1.wait_out(r"relay address: (\S+)").group(1)
    r2 = relay2.wait_out(r"relay address: (\S+)").group(1)
    check("/r?" in r1 and "/r?" in r2, "both relays in relay mode print their relay addresses (/r links)")
    relay1.wait_log(r"relay policy: at most 10 channels")

    owner = Host(work, "owner", owner_yaml(smp, r1, r2))
    link = owner.wait_log(r"channel Swiftplex News \(#\d+\) created with 2 relays; link: (\S+)").group(1)
    check("/c?" in link, "the owner's channel plugin created the channel with both relays and logged its /c link")
    owner.wait_log(r"relay one is active")
    owner.wait_log(r"relay two is active")
    check(True, "both relays are active at the owner (groupRelayUpdated)")
    relay1.wait_log(r"serving channel #\d+")
    relay2.wait_log(r"serving channel #\d+")
    bot_address = owner.wait_out(r"bot address: (\S+)").group(1)

    admin = Client(profile=Profile(display_name="admin"), db=db(os.path.join(work, "admin")))
    answers: asyncio.Queue = asyncio.Queue()
    admin.on_message(chat_type="direct", content_type="text")(lambda m: answers.put(m.text or ""))
    subs = [Subscriber(work, n) for n in ("sub1", "sub2", "sub3")]
    s1, s2, s3 = subs
    s4 = Subscriber(work, "sub4")  # joins at the end, when relay 1 has altered a post

    async with admin, s1.client, s2.client, s3.client, s4.client:
        tasks = [await serve(c) for c in (admin, s1.client, s2.client, s3.client, s4.client)]

        # The relay address is no link to connect to.
        try:
            answer = await s1.client.api.send_chat_cmd(f"/_connect 1 {r1}")
            check(False, f"connecting to a relay address is refused (got {answer['type']})")
        except ChatAPIError as e:
            error = e.chat_error or {}
            check(error.get("errorType", {}).get("type") == "channelError" and error["errorType"].get("code") == "relayAddress"
                  and error["errorType"].get("message") == "This is a chat relay address, it cannot be used to connect.",
                  f"connecting to a relay address is refused with a typed error ({error})")

        for s in (s1, s2):
            await s.join(link)
        for s in (s1, s2):
            await s.wait(lambda x: x.joined >= 2, "joined through both relays")
        check(True, "two subscribers joined through both relays (userJoinedGroup per relay)")

        contact = await admin.connect_to(bot_address, timeout=90)
        check(contact["profile"]["displayName"] == "News Desk", "the admin is connected to the owner bot")

        async def post(text):
            await admin.api.api_send_text_message(["direct", contact["contactId"]], text)
            while True:
                answer = await asyncio.wait_for(answers.get(), 90)
                if answer.startswith("Posted") or answer.startswith("Not posted"):
                    break
            check(answer == "Posted to Swiftplex News.", f"the owner posted {text!r} ({answer})")

        def has(texts):
            return lambda s: all(t in s.posts for t in texts)

        first = ["post 1", "post 2", "post 3"]
        for t in first:
            await post(t)
        for s in (s1, s2):
            await s.wait(has(first), "posts 1-3 arrive")
        check(True, "posts 1-3 reached both subscribers")

        # Relay 1 dies hard right after a post; two more posts while it is down.
        await post("post 4")
        relay1.process.send_signal(signal.SIGKILL)
        relay1.process.wait()
        started.remove(relay1.process)
        check(True, "relay 1 killed with SIGKILL mid-stream")
        for t in ("post 5", "post 6"):
            await post(t)
        down = ["post 4", "post 5", "post 6"]
        for s in (s1, s2):
            await s.wait(has(down), "posts 4-6 arrive through relay 2")
        check(True, "posts made while relay 1 was down reached both subscribers")

        relay1.start()
        relay1.wait_out(r"relay address: (\S+)")
        relay1.wait_log(r"relay policy: at most 10 channels")
        check(True, "relay 1 restarted on its data")
        later = ["post 7", "post 8", "post 9"]
        for t in later:
            await post(t)
        for s in (s1, s2):
            await s.wait(has(later), "posts 7-9 arrive")

        # A late subscriber gets the history (from the relays' last posts).
        await s3.join(link)
        await s3.wait(lambda x: x.joined >= 2, "the late subscriber joined through both relays")
        history = first + down + later
        await s3.wait(has(history), "the late subscriber gets the history")
        check(True, "the late subscriber got posts 1-9 as history")

        # Relay 2 stops: the restarted relay 1 alone brings the next post to all three.
        stop(relay2.process)
        await post("post 10")
        for s in subs:
            await s.wait(has(["post 10"]), "post 10 arrives through the restarted relay 1")
        check(True, "with relay 2 stopped, post 10 reached all three subscribers through the restarted relay 1")

        everything = history + ["post 10"]
        for s in subs:
            counts = {t: s.posts.count(t) for t in everything}
            check(all(n == 1 for n in counts.values()) and len(s.posts) == len(everything),
                  f"{s.name} has every post exactly once ({counts}, {len(s.posts)} in all)")

        status = relay1.status()
        chat_relay = status["bots"][0]["chatRelay"]
        channel = chat_relay["channels"][0]
        check(channel["subscribers"] == 3 and channel["forwarded"] >= 1 and "deliveriesPending" in channel,
              f"relay 1's status shows the channel's counters ({channel})")

        # The owner restarts: its channel plugin reuses the channel (same link) and posts again.
        stop(owner.process)
        owner.start()
        reused = owner.wait_log(r"channel Swiftplex News \(#\d+\) reused; link: (\S+)").group(1)
        check(reused == link, "the restarted owner's channel plugin reuses its channel")
        await post("post 11")
        for s in subs:
            await s.wait(has(["post 11"]), "post 11 from the restarted owner arrives")
        check(all(s.posts.count("post 11") == 1 for s in subs), "a post from the restarted owner reached all three once")

        # Relay 1's operator leaves the channel: it refuses the owner's new invitation (rejected)
        # until allowed again; then it serves again and the subscribers rejoin it.
        relay2.start()
        relay2.wait_out(r"relay address: (\S+)")
        channel1 = relay1.status()["bots"][0]["chatRelay"]["channels"][0]
        mark = owner.err.mark()
        left = relay1.command(f"/_leave #{channel1['groupId']}")
        check(left["type"] == "leftMemberUser", f"relay 1 leaves the channel ({left['type']})")
        after = relay1.status()["bots"][0]["chatRelay"]["channels"][0]
        check(after["relayStatus"] == "rejected" and after["subscribers"] == 0, f"relay 1's status: the channel it left, no subscribers ({after})")
        owned = owner.admin("/api/channels")["channels"][0]
        owner_group = owned["groupInfo"]["groupId"]
        relay_one = next(r["userChatRelay"]["chatRelayId"] for r in owned["relays"] if r["userChatRelay"]["address"] == r1)

        def relay_one_status():
            """The status of relay 1's latest membership (each invitation makes a new one)."""
            relays = owner.admin(f"/api/groups/{owner_group}/relays")["relays"]
            return max((r for r in relays if r["userChatRelay"]["chatRelayId"] == relay_one), key=lambda r: r["groupRelayId"])["relayStatus"]

        # The owner's channel plugin logs each groupRelayUpdated it gets.
        owner.wait_log(r"relay one is inactive", since=mark)
        check(relay_one_status() == "inactive", "the owner sees relay 1 inactive after it left")
        await post("post 12")
        for s in subs:
            await s.wait(has(["post 12"]), "post 12 arrives through relay 2")
        mark = owner.err.mark()
        again = owner.command(f"/_add relays #{owner_group} {relay_one}")
        check(again["type"] == "groupRelaysAdded", f"the owner invites relay 1 again ({again['type']})")
        owner.wait_log(r"relay one is rejected", since=mark)
        check(relay_one_status() == "rejected", "relay 1 refuses the channel it left: the owner sees it rejected")
        allowed = relay1.command(f"/_relay allow #{channel1['groupId']}")
        check(allowed["type"] == "relayGroupAllowed", f"relay 1's operator allows the channel again ({allowed['type']})")
        joined_before = {s.name: s.joined for s in subs}
        mark = owner.err.mark()
        once = owner.command(f"/_add relays #{owner_group} {relay_one}")
        check(once["type"] == "groupRelaysAdded", f"the owner invites relay 1 once more ({once['type']})")
        owner.wait_log(r"relay one is active", since=mark)
        check(relay_one_status() == "active", "relay 1 serves the channel again (active)")
        for s in subs:  # told of the relay by relay 2 (x.grp.relay.new), each joins it: userJoinedGroup
            await s.wait(lambda x, n=joined_before[s.name]: x.joined > n, "rejoins relay 1")
        check(True, "relay 1 is active again and the three subscribers rejoined it")
        # Relay 2 stops: post 13 can only come through relay 1.
        stop(relay2.process)
        await post("post 13")
        for s in subs:
            await s.wait(has(["post 13"]), "post 13 arrives through relay 1 alone")
        check(all(s.posts.count(t) == 1 for s in subs for t in ("post 12", "post 13")),
              "posts 12 and 13 reached all three once, 13 through the re-admitted relay 1 alone")

        # A relay that alters a post: relay 1's stored history is edited while it is stopped (as
        # its operator could: the signed post is in its database). A new subscriber gets the
        # history from both relays, refuses relay 1's altered copy (the owner's signature no
        # longer matches) and shows relay 2's.
        stop(relay1.process)
        relay_db = sqlite3.connect(os.path.join(work, "relay1-data", "bot_chat.db"))
        altered = 0
        # (The channel it serves since it was allowed again is its newest channel group.)
        for row_id, body in relay_db.execute("SELECT id, body FROM channel_history WHERE group_id = (SELECT max(group_id) FROM channel_history)").fetchall():
            if b'"text":"post 13"' in body:
                relay_db.execute("UPDATE channel_history SET body = ? WHERE id = ?", (body.replace(b'"text":"post 13"', b'"text":"post XY"'), row_id))
                altered += 1
        relay_db.commit()
        relay_db.close()
        check(altered == 1, f"relay 1's copy of post 13 altered in its history ({altered})")
        relay1.start()
        relay1.wait_out(r"relay address: (\S+)")
        relay2.start()
        relay2.wait_out(r"relay address: (\S+)")
        await s4.join(link)
        await s4.wait(lambda x: x.joined >= 2, "the fourth subscriber joined through both relays")

        await s4.wait(has(["post 13"]), "the honest copy of post 13 arrives from relay 2")
        # Relay 2 stops: the next post comes through relay 1 alone, after its history (a relay
        # delivers in order), so once it is here relay 1's altered copy has been judged.
        stop(relay2.process)
        await post("post 14")
        await s4.wait(has(["post 14"]), "post 14 arrives through relay 1 after its history")
        answer = await s4.client.api.send_chat_cmd(f"/_get relays #{s4.group}")
        stats = [r.get("relayStats") or {} for r in answer["groupRelays"]]
        check(sorted(st.get("rejected", 0) for st in stats) == [0, 1],
              f"one relay's copy was refused by its signature, the other relay's none ({stats})")
        check("post XY" not in s4.posts and s4.posts.count("post 13") == 1,
              f"the altered post is never shown; the honest post 13 once ({s4.posts})")

        for c in (admin, s1.client, s2.client, s3.client, s4.client):
            c.stop()
        for t in tasks:
            await t
    for h in (relay1, owner):
        stop(h.process)


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-python-channels-")
    relay, smp = start_relay(os.path.join(work, "smp"))
    os.environ["SWIFTPLEX_SERVERS"] = smp
    try:
        asyncio.run(channels(work, smp))
    finally:
        stop(relay)


if __name__ == "__main__":
    run("python channels", main)
