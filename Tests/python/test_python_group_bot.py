"""End-to-end: examples/python-bot/group_bot.py — a group bot for the unmodified `simplex-chat`
Python library (7.0.2) — on Swiftplex's libsimplex.so.

A real swiftplex-relay process, the example bot as a separate process, and two library Clients in
this process: ann connects to the bot's address and to ben, makes a group, adds the bot (it joins
from its `receivedGroupInvitation` handler) and ben. ben asks `?rules` and `?lunch` in the group;
the bot answers each in the group with `msg.reply`, quoting the question, and ann sees the answers
too.

Prints `python group bot: N passed, 0 failed`; exits non-zero on the first failure.
"""

import asyncio
import os
import sys
import tempfile

from simplex_chat import Client, Profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_bot import serve, start_bot, start_relay, stop  # noqa: E402  (shared helpers)
from harness import check, run, db, db_env


def sender(message):
    return message.chat_item["chatItem"]["chatDir"]["groupMember"]["memberProfile"]["displayName"]


def quoted_text(message):
    return ((message.chat_item["chatItem"].get("quotedItem") or {}).get("content") or {}).get("text")


async def session(work, link):
    ann, ben = (Client(profile=Profile(display_name=n), db=db(os.path.join(work, n))) for n in ("ann", "ben"))
    texts = {ann: asyncio.Queue(), ben: asyncio.Queue()}
    for c in (ann, ben):
        c.on_message(chat_type="group", content_type="text")(lambda m, q=texts[c]: q.put(m))
    joined = asyncio.Queue()
    connected = asyncio.Queue()
    ann.on_event("contactConnected")(lambda e: connected.put(e["contact"]))
    ann.on_event("joinedGroupMember")(lambda e: joined.put(e["member"]["memberProfile"]["displayName"]))
    ben_group = asyncio.Queue()

    ben.on_event("receivedGroupInvitation")(lambda e: ben.api.api_join_group(e["groupInfo"]["groupId"]))
    ben.on_event("userJoinedGroup")(lambda e: ben_group.put(e["groupInfo"]["groupId"]))
    ben_met = asyncio.Queue()
    ben.on_event("connectedToGroupMember")(lambda e: ben_met.put(e["member"]["memberProfile"]["displayName"]))

    async def next_from(client, name):
        while True:
            message = await asyncio.wait_for(texts[client].get(), 60)
            if sender(message) == name:
                return message

    async with ann, ben:
        tasks = [await serve(c) for c in (ann, ben)]
        bot = await ann.connect_to(link, timeout=60)
        check(bot["profile"]["displayName"] == "Group helper", "ann connects to the bot's address")
        invitation = await ann.api.api_create_link(1)
        await ben.connect_to(invitation, timeout=60)
        while (contact := await asyncio.wait_for(connected.get(), 60))["profile"]["displayName"] != "ben":
            pass
        ben_in_ann = contact["contactId"]

        group = await ann.api.api_new_group(1, {"displayName": "club", "fullName": ""})
        gid = group["groupId"]
        await ann.api.api_add_member(gid, bot["contactId"], "member")
        check(await asyncio.wait_for(joined.get(), 60) == "Group helper", "the bot joins the group from its invitation handler")
        await ann.api.api_add_member(gid, ben_in_ann, "member")
        ben_gid = await asyncio.wait_for(ben_group.get(), 60)
        check(await asyncio.wait_for(ben_met.get(), 60) == "Group helper", "ben is connected to the bot in the group")

        await ben.api.api_send_text_message({"chatType": "group", "chatId": ben_gid}, "?rules")
        answer = await next_from(ben, "Group helper")
        check(answer.text == "Be kind, stay on topic, no spam.", "the bot answers ?rules in the group")
        check(quoted_text(answer) == "?rules", "the answer quotes the question (msg.reply)")
        seen = await next_from(ann, "Group helper")
        check(seen.text == answer.text and quoted_text(seen) == "?rules", "the other member sees the answer and its quote")

        await ben.api.api_send_text_message({"chatType": "group", "chatId": ben_gid}, "?lunch")
        answer = await next_from(ben, "Group helper")
        check(answer.text.startswith("I know nothing about 'lunch'") and quoted_text(answer) == "?lunch",
              "an unknown topic gets the help, quoting the question")
        for c in (ann, ben):
            c.stop()
        await asyncio.gather(*tasks)


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-python-group-bot-")
    relay, address = start_relay(os.path.join(work, "relay"))
    os.environ["SWIFTPLEX_SERVERS"] = address
    env = dict(os.environ, **db_env(os.path.join(work, "bot")))
    bot, output = start_bot(env, os.path.join(work, "bot.log"), script="group_bot.py")
    try:
        link = output.wait_for(r"Bot address: (\S+)").group(1)
        check(link.startswith("simplex:/contact#/"), "the group bot prints its address")
        asyncio.run(session(work, link))
    finally:
        stop(bot)
        stop(relay)


if __name__ == "__main__":
    run("python group bot", main)
