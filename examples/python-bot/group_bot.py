"""A group helper bot for the official SimpleX Python library, running on Swiftplex through
libsimplex.so: add it to a group and it joins; ask `?topic` in the group and it answers there,
quoting the question (`msg.reply`). See README.md in this folder."""

from simplex_chat import Bot, Profile

ANSWERS = {
    "rules": "Be kind, stay on topic, no spam.",
    "meeting": "We meet every Monday at 10:00 UTC.",
    "help": "Ask me ?rules or ?meeting.",
}
from bot_db import database  # BOT_DB: an SQLite prefix or a PostgreSQL connection string

bot = Bot(
    profile=Profile(display_name="Group helper"),
    db=database("./group_bot"),
    welcome="Add me to a group, then ask ?help there.",
)


@bot.on_event("receivedGroupInvitation")
async def join(event):
    """Joins every group it is invited to."""
    await bot.api.api_join_group(event["groupInfo"]["groupId"])


@bot.on_message(chat_type="group", content_type="text")
async def answer(message):
    text = (message.text or "").strip()
    if not text.startswith("?"):
        return
    topic = text[1:].strip().lower()
    await message.reply(ANSWERS.get(topic, f"I know nothing about '{topic}'. {ANSWERS['help']}"))


@bot.on_message(chat_type="direct", content_type="text")
async def direct(message):
    await message.reply("I answer in groups: add me to one and ask ?help there.")


if __name__ == "__main__":
    bot.run()
