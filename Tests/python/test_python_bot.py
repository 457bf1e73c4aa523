"""End-to-end: the unmodified `simplex-chat` Python library (7.0.2) on Swiftplex's libsimplex.so.

Starts a real swiftplex-relay process, runs examples/python-bot/squaring_bot.py as a separate
process, and talks to it with the library's own Client: connect through the bot's address, get the
welcome, get squares back; then restarts the bot from the same database and checks that it still
knows the contact and answers, including a message sent while it was down.

Run by `make test` with SIMPLEX_LIBS_DIR set to the build directory. Prints
`python: N passed, 0 failed` and exits non-zero on the first failure.
"""

import asyncio
import os
import re
import subprocess
import sys
import tempfile
import threading

from simplex_chat import Client, Profile
from harness import ROOT, check, run, start_relay, stop, db, db_env


class ProcessOutput:
    """A process's output, read line by line on a thread as it arrives (and copied to a log file);
    `wait_for` is woken by each new line, no polling."""

    def __init__(self, stream, log_path):
        self.lines = []
        self.ended = False
        self.changed = threading.Condition()
        self.log = open(log_path, "a")
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.log.write(line)
            self.log.flush()
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.ended = True
            self.changed.notify_all()

    @property
    def text(self):
        with self.changed:
            return "".join(self.lines)

    def mark(self):
        """Where the output is now: `wait_for(..., since=mark)` looks only at what comes after."""
        with self.changed:
            return len(self.lines)

    def wait_for(self, pattern, timeout=60, since=0):
        found = []

        def match():
            m = re.search(pattern, "".join(self.lines[since:]))
            if m:
                found.append(m)
            return m is not None or self.ended

        with self.changed:
            self.changed.wait_for(match, timeout)
        if not found:
            print(self.text)
            check(False, f"bot output shows {pattern!r}")
        return found[0]


def start_bot(env, log_path, script="squaring_bot.py"):
    bot = subprocess.Popen([sys.executable, os.path.join(ROOT, "examples/python-bot", script)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return bot, ProcessOutput(bot.stdout, log_path)


async def serve(client):
    """Runs `client`'s receive loop in a task and returns the task once the loop runs:
    serve_forever marks the client serving before its first await, so yielding to the event loop
    until then is a handful of scheduler turns, not a timed wait."""
    task = asyncio.create_task(client.serve_forever())
    while not client._serving and not task.done():
        await asyncio.sleep(0)
    return task


async def talk(client_db, link, steps):
    client = Client(profile=Profile(display_name="tester"), db=db(client_db))
    received: asyncio.Queue = asyncio.Queue()

    @client.on_message(content_type="text")
    async def on_text(message):
        await received.put(message.text or "")

    async with client:
        serving = await serve(client)
        await steps(client, received, link)
        client.stop()
        await serving


async def first_session(client, received, link):
    contact = await client.connect_to(link, timeout=60)
    check(contact["profile"]["displayName"] == "Squaring bot", "connect_to reaches the bot through its address")
    check(contact["profile"].get("peerType") == "bot", "the bot's profile says peerType bot")
    commands = contact["mergedPreferences"].get("commands") or []
    check(any(c.get("keyword") == "help" for c in commands), "the bot's command menu reaches the client")
    welcome = await asyncio.wait_for(received.get(), 30)
    check(welcome == "Send me a number and I will square it.", "the engine sends the address welcome message")
    reply = await client.send_and_wait(contact["contactId"], "5", timeout=30)
    check(reply.text == "25", "send_and_wait gets the square")
    quoted = reply.chat_item["chatItem"].get("quotedItem") or {}
    check(quoted.get("content", {}).get("text") == "5" and quoted.get("chatDir", {}).get("type") == "directSnd",
          "Message.reply quotes the question (quotedItemId), and the quote reaches the client")
    chat = await client.api.api_get_chat("direct", contact["contactId"], 2)
    check([i["content"]["msgContent"]["text"] for i in chat["chatItems"]] == ["5", "25"], "api_get_chat pages the chat, oldest first")
    reply = await client.send_and_wait(contact["contactId"], "/help", timeout=30)
    check("square" in (reply.text or ""), "bot commands are dispatched by on_command")
    contacts = await client.api.api_list_contacts(1)
    check(len(contacts) == 1, "the client lists one contact")
    return contact


async def clients_among_themselves(work):
    """Two plain Clients connect by a one-time invitation; a third person's request to an address
    without auto-accept is rejected by an on_event("receivedContactRequest") handler, a fourth's
    is accepted."""
    def new_client(name):
        return Client(profile=Profile(display_name=name), db=db(os.path.join(work, name)))

    ann, ben, cat, dan = new_client("ann"), new_client("ben"), new_client("cat"), new_client("dan")
    decisions = []
    decided: asyncio.Queue = asyncio.Queue()
    ann_connected: asyncio.Queue = asyncio.Queue()

    @ann.on_event("contactConnected")
    async def connected(event):
        await ann_connected.put(event["contact"])

    @ann.on_event("receivedContactRequest")
    async def decide(event):
        request = event["contactRequest"]
        name = request["profile"]["displayName"]
        decisions.append(name)
        await decided.put(name)
        if name == "cat":
            await ann.api.api_reject_contact_request(request["contactRequestId"])
        else:
            await ann.api.api_accept_contact_request(request["contactRequestId"])

    reactions: asyncio.Queue = asyncio.Queue()

    @ann.on_event("chatItemReaction")
    async def reacted(event):
        await reactions.put(event)

    ben_texts: asyncio.Queue = asyncio.Queue()

    @ben.on_message(content_type="text")
    async def ben_text(message):
        await ben_texts.put(message.text or "")

    async with ann, ben, cat, dan:
        tasks = [await serve(c) for c in (ann, ben, cat, dan)]
        invitation = await ann.api.api_create_link(1)
        check(invitation.startswith("simplex:/invitation#/?v=1&smp="), "api_create_link returns a one-time invitation")
        contact = await ben.connect_to(invitation, timeout=60)
        check(contact["profile"]["displayName"] == "ann", "a Client connects to another Client's invitation")
        ben_at_ann = await asyncio.wait_for(ann_connected.get(), 30)
        check(ben_at_ann["profile"]["displayName"] == "ben", "the inviting Client sees contactConnected too")
        reply_waiter = asyncio.create_task(ann.send_and_wait(ben_at_ann["contactId"], "hello ben", timeout=30))
        # ann's reply waiter is in place before she sends: ben has her message, so he answers it.
        hello = await asyncio.wait_for(ben_texts.get(), 30)
        if hello != "hello ben":
            check(False, f"ben gets ann's message (got {hello!r})")
        await ben.api.api_send_text_message({"chatType": "direct", "chatId": contact["contactId"]}, "hi ann")
        check((await reply_waiter).text == "hi ann", "messages flow between the two Clients")

        # Edits, reactions and deletions reach the peer as events.
        seen: asyncio.Queue = asyncio.Queue()
        for tag in ("chatItemUpdated", "chatItemReaction", "chatItemsDeleted"):
            ben.on_event(tag)(lambda event, q=seen: q.put(event))
        items = await ann.api.api_send_text_message({"chatType": "direct", "chatId": ben_at_ann["contactId"]}, "typo")
        item_id = items[0]["chatItem"]["meta"]["itemId"]
        await ann.api.api_update_chat_item("direct", ben_at_ann["contactId"], item_id, {"type": "text", "text": "fixed"})
        event = await asyncio.wait_for(seen.get(), 30)
        check(event["type"] == "chatItemUpdated" and event["chatItem"]["chatItem"]["content"]["msgContent"]["text"] == "fixed",
              "an edit arrives as chatItemUpdated")
        theirs = event["chatItem"]["chatItem"]["meta"]["itemId"]
        await ben.api.api_chat_item_reaction("direct", contact["contactId"], theirs, True, {"type": "emoji", "emoji": "👍"})
        await ann.api.api_delete_chat_items("direct", ben_at_ann["contactId"], [item_id], "broadcast")
        event = await asyncio.wait_for(seen.get(), 30)
        check(event["type"] == "chatItemsDeleted" and event["byUser"] is False, "a deletion for everyone arrives as chatItemsDeleted")

        event = await asyncio.wait_for(reactions.get(), 30)
        check(event["added"] is True and event["reaction"]["chatReaction"]["reaction"]["emoji"] == "👍",
              "a reaction arrives as chatItemReaction")

        # Chat state through the library: list with unread counts, read, custom data, preferences.
        chats = await ann.api.api_get_chats(1, {"type": "last", "count": 10})
        ben_chat = [c for c in chats if c["chatInfo"].get("contact", {}).get("contactId") == ben_at_ann["contactId"]]
        check(len(ben_chat) == 1 and ben_chat[0]["chatStats"]["unreadCount"] >= 1, "api_get_chats lists the chat with its unread count")
        await ann.api.send_chat_cmd(f"/_read chat @{ben_at_ann['contactId']}")
        chats = await ann.api.api_get_chats(1, {"type": "last", "count": 10}, {"type": "filters", "favorite": False, "unread": True})
        check(chats == [], "after /_read chat no chat is unread")
        await ann.api.api_set_contact_custom_data(ben_at_ann["contactId"], {"tier": "gold"})
        listed = await ann.api.api_list_contacts(1)
        check(listed[0].get("customData") == {"tier": "gold"}, "api_set_contact_custom_data is stored on the contact")
        ben_updates: asyncio.Queue = asyncio.Queue()
        ben.on_event("contactUpdated")(lambda event, q=ben_updates: q.put(event))
        await ann.api.api_set_contact_prefs(ben_at_ann["contactId"], {"files": {"allow": "no"}})
        event = await asyncio.wait_for(ben_updates.get(), 30)
        check(event["toContact"]["profile"]["preferences"]["files"]["allow"] == "no", "api_set_contact_prefs reaches the contact as contactUpdated")

        address = await ann.api.api_create_user_address(1)
        link = address["connFullLink"]
        await cat.api.api_connect_active_user(link)
        await asyncio.wait_for(decided.get(), 10)
        check(decisions == ["cat"], "receivedContactRequest reaches on_event without auto-accept")
        dan_contact = await dan.connect_to(link, timeout=60)
        check(dan_contact["profile"]["displayName"] == "ann" and decisions == ["cat", "dan"], "an accepted request connects")
        cat_contacts = await cat.api.api_list_contacts(1)
        check(cat_contacts == [], "a rejected requester gets no contact")

        # Deleting a contact tells the peer.
        dan_deleted: asyncio.Queue = asyncio.Queue()
        dan.on_event("contactDeletedByContact")(lambda event, q=dan_deleted: q.put(event))
        dan_at_ann = [c for c in await ann.api.api_list_contacts(1) if c["profile"]["displayName"] == "dan"][0]
        await ann.api.api_delete_chat("direct", dan_at_ann["contactId"])
        event = await asyncio.wait_for(dan_deleted.get(), 30)
        check(event["contact"]["contactStatus"] == "deleted", "api_delete_chat: the peer gets contactDeletedByContact")

        # A second user: switch to it and back, then delete it.
        await cat.api.api_create_active_user({"displayName": "cat2", "fullName": ""})
        user = await cat.api.api_set_active_user(1)
        check(user["userId"] == 1, "api_set_active_user switches the active user")
        await cat.api.api_delete_user(2, True)
        check(len(await cat.api.api_list_users()) == 1, "api_delete_user deletes a user that is not active")
        for c in (ann, ben, cat, dan):
            c.stop()
        await asyncio.gather(*tasks)


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-python-")
    relay, address = start_relay(os.path.join(work, "relay"))
    env = dict(os.environ, SWIFTPLEX_SERVERS=address, **db_env(os.path.join(work, "bot")))
    os.environ["SWIFTPLEX_SERVERS"] = address
    bot_log = os.path.join(work, "bot.log")
    bot, output = start_bot(env, bot_log)
    link = output.wait_for(r"Bot address: (\S+)").group(1)
    check(link.startswith("simplex:/contact#/?v=1&smp="), "the Python Bot created its address through the Chat API")
    client_db = os.path.join(work, "tester")
    contact_holder = {}

    async def session1(client, received, link):
        contact_holder["contact"] = await first_session(client, received, link)

    asyncio.run(talk(client_db, link, session1))

    # Restart the bot from the same database; a message sent while it is down arrives after.
    stop(bot)

    async def session2(client, received, link):
        contact_id = contact_holder["contact"]["contactId"]
        await client.api.api_send_text_message({"chatType": "direct", "chatId": contact_id}, "9")
        bot2, output2 = start_bot(env, bot_log)
        contact_holder["bot2"] = bot2
        output2.wait_for(r"Bot address: ")
        restarted = output2.text
        check("creating" not in restarted, "the restarted bot reuses its user and address")
        answer = await asyncio.wait_for(received.get(), 60)
        check(answer == "81", "a message sent while the bot was down is answered after its restart")
        reply = await client.send_and_wait(contact_id, "3", timeout=30)
        check(reply.text == "9", "the restarted bot still knows the contact")

    asyncio.run(talk(client_db, link, session2))
    stop(contact_holder["bot2"])
    asyncio.run(clients_among_themselves(work))
    stop(relay)


if __name__ == "__main__":
    run("python", main)
