"""Groups through the unmodified `simplex-chat` Python library (7.0.2) on Swiftplex's libsimplex.so.

A real swiftplex-relay process; three library Clients (ann, ben, cat) and a library `Bot`, all in
this process, each with its own SQLite database. ann connects to the others by one-time
invitations, creates a group with `api_new_group`, invites them with `api_add_member`; they join
with `api_join_group` from an `on_event("receivedGroupInvitation")` handler. Messages go through
the group, and the Bot's `on_message(chat_type="group")` handler answers in the group with
`msg.reply`. Then `api_list_members`, `api_set_members_role`, `api_block_members_for_all`,
`api_update_group_profile`, `api_remove_members`, `api_leave_group`, `api_list_groups`,
`api_get_chat` and `api_delete_chat` on the group, each checked by the events the others get.
A fourth Client (dan) joins by the group's link: `api_create_group_link`, `api_get_group_link_str`,
`api_connect_plan` and `api_connect_active_user` with the link, `api_set_group_link_member_role`,
`api_delete_group_link`. With `memberAdmission.review = "all"` a fifth (eve) waits for review until
`api_accept_member` admits her. Ben opens a direct chat with cat, a fellow member, with
`api_create_member_contact` and `api_send_member_contact_invitation` (cat accepts automatically:
`api_set_auto_accept_member_contacts`).
Then, with two more clients, `api_update_chat_item`, `api_chat_item_reaction`,
`api_delete_member_chat_item` and `api_delete_chat_items` on a group (`group_items`).

Prints `python groups: N passed, 0 failed`; exits non-zero on the first failure.
"""

import asyncio
import os
import sys
import tempfile

from simplex_chat import Bot, Client, Profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_python_bot import serve, start_relay, stop  # noqa: E402  (shared helpers)
from harness import check, run, db


class Events:
    """Every event of the given types one client gets, in order; `wait` is woken by each arrival."""

    def __init__(self, client, *tags):
        self.seen = []
        self.changed = asyncio.Condition()
        for tag in tags:
            client.on_event(tag)(self._add)

    async def _add(self, event):
        async with self.changed:
            self.seen.append(event)
            self.changed.notify_all()

    async def wait(self, predicate, what, timeout=60):
        """The first event (in arrival order) that `predicate` accepts."""
        def found():
            return next((e for e in self.seen if predicate(e)), None)
        try:
            async with self.changed:
                await asyncio.wait_for(self.changed.wait_for(lambda: found() is not None), timeout)
        except asyncio.TimeoutError:
            check(False, f"{what} (events seen: {[e['type'] for e in self.seen]})")
        return found()


def of_type(tag, **fields):
    def predicate(event):
        if event["type"] != tag:
            return False
        return all(f(event) for f in fields.values())
    return predicate


def member_name(member):
    return member["memberProfile"]["displayName"]


async def groups(work):
    def named_db(name):
        return db(os.path.join(work, name))

    ann, ben, cat, dan, eve = (Client(profile=Profile(display_name=n), db=named_db(n)) for n in ("ann", "ben", "cat", "dan", "eve"))
    bot = Bot(profile=Profile(display_name="echo"), db=named_db("echo"), welcome="hi")

    group_tags = ("receivedGroupInvitation", "userJoinedGroup", "joinedGroupMember", "connectedToGroupMember",
                  "memberRole", "memberBlockedForAll", "deletedMember", "deletedMemberUser", "leftMember",
                  "groupDeleted", "groupUpdated", "contactConnected", "groupLinkConnecting", "newMemberContactReceivedInv")
    events = {c: Events(c, *group_tags) for c in (ann, ben, cat, bot, dan, eve)}
    texts = {c: asyncio.Queue() for c in (ann, ben, cat, bot)}
    for c in (ann, ben, cat):
        c.on_message(chat_type="group", content_type="text")(lambda m, q=texts[c]: q.put(m))

    # Every invited client joins from its event handler, as a bot would.
    for c in (ben, cat, bot):
        c.on_event("receivedGroupInvitation")(lambda e, c=c: c.api.api_join_group(e["groupInfo"]["groupId"]))

    @bot.on_message(chat_type="group", content_type="text")
    async def echo(message):
        await texts[bot].put(message)
        await message.reply(f"echo: {message.text}")

    names = {ann: "ann", ben: "ben", cat: "cat", bot: "echo", dan: "dan", eve: "eve"}
    errors = []
    for c in (ann, ben, cat, bot, dan, eve):
        c.on_event("chatError")(lambda e, c=c: errors.append((c, e)) or asyncio.sleep(0))

    async with ann, ben, cat, bot, dan, eve:
        tasks = [await serve(c) for c in (ann, ben, cat, bot, dan, eve)]

        contacts = {}
        for c, name in ((ben, "ben"), (cat, "cat"), (bot, "echo")):
            link = await ann.api.api_create_link(1)
            await c.connect_to(link, timeout=60)
            event = await events[ann].wait(of_type("contactConnected", n=lambda e, n=name: e["contact"]["profile"]["displayName"] == n),
                                           f"ann is connected to {name}")
            contacts[name] = event["contact"]["contactId"]
        check(len(await ann.api.api_list_contacts(1)) == 3, "ann has three contacts")

        info = await ann.api.api_new_group(1, {"displayName": "team", "fullName": "The team"})
        gid = info["groupId"]
        check(info["groupProfile"]["displayName"] == "team" and info["membership"]["memberRole"] == "owner",
              "api_new_group creates the group with the user as owner")

        for name in ("ben", "cat", "echo"):
            member = await ann.api.api_add_member(gid, contacts[name], "member")
            check(member_name(member) == name and member["memberStatus"] == "invited", f"api_add_member invites {name}")

        group_ids = {}
        for c, name in ((ben, "ben"), (cat, "cat"), (bot, "echo")):
            invitation = await events[c].wait(of_type("receivedGroupInvitation"), f"{name} gets receivedGroupInvitation")
            check(invitation["groupInfo"]["groupProfile"]["displayName"] == "team", f"{name}'s invitation names the group")
            group_ids[c] = invitation["groupInfo"]["groupId"]
            await events[c].wait(of_type("userJoinedGroup"), f"{name} joined (userJoinedGroup)")
        # Everyone is connected to everyone: each joiner connects to the two other members and ann.
        for c, name in ((ben, "ben"), (cat, "cat"), (bot, "echo")):
            others = {"ann", "ben", "cat", "echo"} - {name}
            for other in others - {"ann"}:
                await events[c].wait(of_type("connectedToGroupMember", m=lambda e, o=other: member_name(e["member"]) == o),
                                     f"{name} is connected to {other} in the group")
        members = await ann.api.api_list_members(gid)
        check(sorted((member_name(m), m["memberStatus"]) for m in members) == [("ben", "connected"), ("cat", "connected"), ("echo", "connected")],
              "api_list_members lists the three connected members")
        ids = {member_name(m): m["groupMemberId"] for m in members}

        # A message to the group reaches every member once; the Bot answers in the group with msg.reply.
        sent = await ben.api.api_send_text_message({"chatType": "group", "chatId": group_ids[ben]}, "hello team")
        check(sent[0]["chatInfo"]["type"] == "group" and sent[0]["chatItem"]["chatDir"]["type"] == "groupSnd",
              "api_send_text_message to a group answers a groupSnd item")
        for c, name in ((ann, "ann"), (cat, "cat"), (bot, "echo")):
            message = await asyncio.wait_for(texts[c].get(), 30)
            check(message.text == "hello team" and member_name(message.chat_item["chatItem"]["chatDir"]["groupMember"]) == "ben",
                  f"{name} gets ben's group message with ben as the sender")
        for c, name in ((ann, "ann"), (ben, "ben"), (cat, "cat")):
            message = await asyncio.wait_for(texts[c].get(), 30)
            quoted = message.chat_item["chatItem"].get("quotedItem") or {}
            check(message.text == "echo: hello team" and member_name(message.chat_item["chatItem"]["chatDir"]["groupMember"]) == "echo",
                  f"{name} gets the Bot's msg.reply in the group")
            check(quoted.get("content", {}).get("text") == "hello team", f"the Bot's reply quotes ben's message at {name}")
            quoted_dir = quoted.get("chatDir") or {}
            if c is ben:
                check(quoted_dir.get("type") == "groupSnd" and quoted.get("itemId") == sent[0]["chatItem"]["meta"]["itemId"],
                      "at ben the quote points to his own sent item")
            else:
                check(quoted_dir.get("type") == "groupRcv" and member_name(quoted_dir["groupMember"]) == "ben",
                      f"at {name} the quote names ben as its author")

        chat = await ann.api.api_get_chat("group", gid, 10)
        check([i["content"]["msgContent"]["text"] for i in chat["chatItems"]] == ["hello team", "echo: hello team"],
              "api_get_chat pages the group's items")
        groups = await cat.api.api_list_groups(1)
        check([g["groupProfile"]["displayName"] for g in groups] == ["team"], "api_list_groups lists the group")

        # Member contacts: ben opens a direct chat with cat, a member he is not connected to as a
        # contact; cat accepts such invitations automatically.
        await cat.api.api_set_auto_accept_member_contacts(1, True)
        cat_in_ben = next(m for m in await ben.api.api_list_members(group_ids[ben]) if member_name(m) == "cat")
        contact = await ben.api.api_create_member_contact(group_ids[ben], cat_in_ben["groupMemberId"])
        check(contact["contactGroupMemberId"] == cat_in_ben["groupMemberId"], "api_create_member_contact makes a contact for the member")
        contact = await ben.api.api_send_member_contact_invitation(contact["contactId"], "hi cat, ben here")
        check(contact["contactGrpInvSent"] is True, "api_send_member_contact_invitation sends the invitation")
        event = await events[cat].wait(of_type("newMemberContactReceivedInv"), "cat gets newMemberContactReceivedInv")
        check(member_name(event["member"]) == "ben" and event["member"]["memberContactId"] == event["contact"]["contactId"],
              "cat's new contact is linked to ben the member")
        await events[cat].wait(of_type("contactConnected", n=lambda e: e["contact"]["profile"]["displayName"] == "ben"), "cat is connected to ben")
        await events[ben].wait(of_type("contactConnected", n=lambda e: e["contact"]["contactId"] == contact["contactId"]), "ben is connected to cat")

        # Roles, blocking, the group profile.
        await ann.api.api_set_members_role(gid, [ids["cat"]], "admin")
        event = await events[ben].wait(of_type("memberRole"), "ben gets memberRole")
        check(member_name(event["member"]) == "cat" and event["toRole"] == "admin", "api_set_members_role: members see cat become admin")
        await ann.api.api_block_members_for_all(gid, [ids["echo"]], True)
        event = await events[cat].wait(of_type("memberBlockedForAll"), "cat gets memberBlockedForAll")
        check(member_name(event["member"]) == "echo" and event["blocked"] is True, "api_block_members_for_all reaches the members")
        await ann.api.api_block_members_for_all(gid, [ids["echo"]], False)
        updated = await ann.api.api_update_group_profile(gid, {"displayName": "team", "fullName": "The whole team"})
        check(updated["groupProfile"]["fullName"] == "The whole team", "api_update_group_profile answers the new profile")
        event = await events[bot].wait(of_type("groupUpdated"), "the Bot gets groupUpdated")
        check(event["toGroup"]["groupProfile"]["fullName"] == "The whole team", "members get the new profile")

        # Removing and leaving.
        removed = await ann.api.api_remove_members(gid, [ids["ben"]])
        check([member_name(m) for m in removed] == ["ben"], "api_remove_members answers the removed member")
        await events[ben].wait(of_type("deletedMemberUser"), "ben gets deletedMemberUser")
        event = await events[cat].wait(of_type("deletedMember"), "cat gets deletedMember")
        check(member_name(event["deletedMember"]) == "ben", "the others see ben removed")
        left = await cat.api.api_leave_group(group_ids[cat])
        check(left["membership"]["memberStatus"] == "left", "api_leave_group: cat's membership is left")
        event = await events[ann].wait(of_type("leftMember"), "ann gets leftMember")
        check(member_name(event["member"]) == "cat", "the owner sees cat leave")
        members = await ann.api.api_list_members(gid)
        check({member_name(m): m["memberStatus"] for m in members} == {"ben": "removed", "cat": "left", "echo": "connected"},
              "api_list_members shows who was removed and who left")

        # The group's link (after ben and cat are gone): dan, a stranger to everyone, joins by it as the link's role.
        link = await ann.api.api_create_group_link(gid, "member")
        check(link.startswith("https://") and "/g?" in link, "api_create_group_link answers a /g short link")
        check(await ann.api.api_get_group_link_str(gid) == link, "api_get_group_link_str answers the same link")
        plan, conn_link = await dan.api.api_connect_plan(1, link)
        check(plan["type"] == "groupLink" and plan["groupLinkPlan"]["type"] == "ok" and conn_link["connFullLink"].startswith("simplex:/contact"),
              "api_connect_plan of the link: a group link, ok to join")
        own_plan, _ = await ann.api.api_connect_plan(1, link)
        check(own_plan["groupLinkPlan"]["type"] == "ownLink", "the owner's plan of its own link is ownLink")
        check(await dan.api.api_connect_active_user(link) == "contact", "api_connect_active_user sends the join request")
        event = await events[dan].wait(of_type("groupLinkConnecting"), "dan gets groupLinkConnecting")
        check(member_name(event["hostMember"]) == "ann", "the link's host is ann")
        event = await events[dan].wait(of_type("userJoinedGroup"), "dan joined (userJoinedGroup)")
        check(event["groupInfo"]["membership"]["memberRole"] == "member", "dan joined with the link's role")
        event = await events[ann].wait(of_type("joinedGroupMember", m=lambda e: member_name(e["member"]) == "dan"), "ann gets joinedGroupMember for dan")
        await events[bot].wait(of_type("connectedToGroupMember", m=lambda e: member_name(e["member"]) == "dan"),
                               "the Bot is connected to dan in the group")
        await ann.api.api_set_group_link_member_role(gid, "observer")
        check((await ann.api.api_get_group_link(gid))["acceptMemberRole"] == "observer", "api_set_group_link_member_role changes the link's role")
        await ann.api.api_delete_group_link(gid)
        try:
            await ann.api.api_get_group_link(gid)
            check(False, "api_get_group_link after api_delete_group_link raises")
        except Exception as e:
            check("groupLinkNotFound" in repr(getattr(e, "chat_error", None)) + repr(e), "api_get_group_link after api_delete_group_link raises groupLinkNotFound")

        # Admission review: eve waits until ann admits her with api_accept_member.
        await ann.api.api_update_group_profile(gid, {"displayName": "team", "fullName": "The whole team", "memberAdmission": {"review": "all"}})
        link = await ann.api.api_create_group_link(gid, "member")
        check(await eve.api.api_connect_active_user(link) == "contact", "eve sends her join request")
        event = await events[eve].wait(of_type("userJoinedGroup"), "eve's connection to the host is up")
        check(event["groupInfo"]["membership"]["memberStatus"] == "pending_review", "eve waits for review")
        event = await events[ann].wait(of_type("joinedGroupMember", m=lambda e: member_name(e["member"]) == "eve"), "ann gets joinedGroupMember for eve")
        check(event["member"]["memberStatus"] == "pending_review", "the host sees eve waiting for review")
        member = await ann.api.api_accept_member(gid, event["member"]["groupMemberId"], "member")
        check(member_name(member) == "eve" and member["memberStatus"] == "connected", "api_accept_member admits eve")
        await events[eve].wait(of_type("userJoinedGroup", s=lambda e: e["groupInfo"]["membership"]["memberStatus"] == "connected"),
                               "eve is in the group once admitted")
        await events[dan].wait(of_type("connectedToGroupMember", m=lambda e: member_name(e["member"]) == "eve"), "dan is connected to eve")
        await events[bot].wait(of_type("connectedToGroupMember", m=lambda e: member_name(e["member"]) == "eve"), "the Bot is connected to eve")
        await ann.api.api_delete_group_link(gid)

        # The owner deletes the group for everyone.
        await ann.api.api_delete_chat("group", gid)
        await events[bot].wait(of_type("groupDeleted"), "the Bot gets groupDeleted")
        check(await ann.api.api_list_groups(1) == [], "the deleted group is gone from the owner's list")

        # A message still in flight to a member just removed is dropped there quietly: no client
        # gets a chatError event in the whole run.
        check(not errors, f"no chatError events ({[(names[c], e) for c, e in errors]})")
        for c in (ann, ben, cat, bot, dan, eve):
            c.stop()
        await asyncio.gather(*tasks)


async def group_items(work):
    """Edits, deletions, moderation and reactions in a group through the library's ChatApi calls:
    `api_update_chat_item`, `api_chat_item_reaction`, `api_delete_member_chat_item` and
    `api_delete_chat_items` with a group chat, each checked by the event the other member gets."""
    def named_db(name):
        return db(os.path.join(work, name))

    ann, ben = (Client(profile=Profile(display_name=n), db=named_db(n + "-items")) for n in ("ann", "ben"))
    tags = ("receivedGroupInvitation", "userJoinedGroup", "joinedGroupMember", "contactConnected", "chatItemUpdated",
            "chatItemsDeleted", "chatItemReaction", "newChatItems")
    events = {c: Events(c, *tags) for c in (ann, ben)}
    ben.on_event("receivedGroupInvitation")(lambda e: ben.api.api_join_group(e["groupInfo"]["groupId"]))

    def text_item(text):
        def predicate(e):
            items = e.get("chatItems") or []
            return bool(items) and items[0]["chatItem"]["content"].get("msgContent", {}).get("text") == text
        return predicate

    async with ann, ben:
        tasks = [await serve(c) for c in (ann, ben)]
        link = await ann.api.api_create_link(1)
        await ben.connect_to(link, timeout=60)
        contact = (await events[ann].wait(of_type("contactConnected"), "ann is connected to ben"))["contact"]["contactId"]
        gid = (await ann.api.api_new_group(1, {"displayName": "items", "fullName": ""}))["groupId"]
        await ann.api.api_add_member(gid, contact, "member")
        bgid = (await events[ben].wait(of_type("userJoinedGroup"), "ben joined the items group"))["groupInfo"]["groupId"]
        await events[ann].wait(of_type("joinedGroupMember"), "ann sees ben join")

        sent = await ann.api.api_send_text_message({"chatType": "group", "chatId": gid}, "draft")
        ann_item = sent[0]["chatItem"]["meta"]["itemId"]
        got = await events[ben].wait(of_type("newChatItems", t=text_item("draft")), "ben gets ann's draft")
        ben_item = got["chatItems"][0]["chatItem"]["meta"]["itemId"]

        edited = await ann.api.api_update_chat_item("group", gid, ann_item, {"type": "text", "text": "final"})
        check(edited["content"]["msgContent"]["text"] == "final" and edited["meta"]["itemEdited"], "api_update_chat_item edits a group message")
        event = await events[ben].wait(of_type("chatItemUpdated"), "ben gets chatItemUpdated")
        check(event["chatItem"]["chatItem"]["content"]["msgContent"]["text"] == "final", "the member sees the edit")

        reaction = await ben.api.api_chat_item_reaction("group", bgid, ben_item, True, {"type": "emoji", "emoji": "👍"})
        check(reaction["chatReaction"]["reaction"]["emoji"] == "👍", "api_chat_item_reaction reacts in a group")
        event = await events[ann].wait(of_type("chatItemReaction"), "ann gets chatItemReaction")
        counts = event["reaction"]["chatReaction"]["chatItem"]["reactions"]
        check(event["added"] and counts[0]["totalReacted"] == 1 and member_name(event["reaction"]["chatReaction"]["chatDir"]["groupMember"]) == "ben",
              "the author sees ben's reaction")

        await ben.api.api_send_text_message({"chatType": "group", "chatId": bgid}, "spam")
        spam = await events[ann].wait(of_type("newChatItems", t=text_item("spam")), "ann gets ben's spam")
        deletions = await ann.api.api_delete_member_chat_item(gid, [spam["chatItems"][0]["chatItem"]["meta"]["itemId"]])
        check(deletions[0]["toChatItem"]["chatItem"]["content"]["type"] == "rcvModerated", "api_delete_member_chat_item moderates the message")
        event = await events[ben].wait(of_type("chatItemsDeleted"), "ben gets chatItemsDeleted")
        check(event["chatItemDeletions"][0]["toChatItem"]["chatItem"]["content"]["type"] == "sndModerated", "the author sees it moderated")

        deletions = await ann.api.api_delete_chat_items("group", gid, [ann_item], "broadcast")
        check(deletions[0]["toChatItem"]["chatItem"]["content"]["type"] == "sndDeleted", "api_delete_chat_items deletes for everyone")
        event = await events[ben].wait(of_type("chatItemsDeleted", d=lambda e: e["chatItemDeletions"][0]["toChatItem"]["chatItem"]["content"]["type"] == "rcvDeleted"),
                                       "ben gets the deletion")
        check(event["chatItemDeletions"][0]["deletedChatItem"]["chatItem"]["meta"]["itemId"] == ben_item, "the member's copy is deleted")
        for c in (ann, ben):
            c.stop()
        await asyncio.gather(*tasks)


async def scenarios(work):
    await groups(work)
    await group_items(work)


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-python-groups-")
    relay, address = start_relay(os.path.join(work, "relay"))
    os.environ["SWIFTPLEX_SERVERS"] = address
    try:
        asyncio.run(scenarios(work))
    finally:
        stop(relay)


if __name__ == "__main__":
    run("python groups", main)
