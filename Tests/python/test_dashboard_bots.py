"""End-to-end, in a real browser: the dashboard of a host with two bots (`bots:`).

Starts a `swiftplex run` host with two bots (alpha, beta; each with its own auto-reply plugin
instance named `echo`) on its embedded relay, with the admin API, and a `swiftplex-chat -p 0`
person. In headless Chromium: signs in, sees the bot selector with both bots and the plugins
table with each bot's `echo`, chooses beta, sees the person's contact request to beta arrive
live, accepts it, sees the person among beta's contacts and not among alpha's, reloads beta's
`echo` only, and keeps a screenshot as .build/test-artifacts/dashboard-bots.png.

Run by `make python-test`. Prints `python-dashboard-bots: N passed, 0 failed`.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ws_api as support
from test_dashboard import ARTIFACTS, open_browser, sign_in

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select
from harness import run

BIN = support.BIN
check = support.check


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-dashboard-bots-")
    config = os.path.join(work, "host.yaml")
    with open(config, "w") as f:
        f.write(f"""data_dir: {os.path.join(work, "host")}
relays: embedded
embedded_relay:
  listen: 127.0.0.1:0
admin:
  listen: 127.0.0.1:0
plugin_dirs: ["{BIN}"]
bots:
  - name: alpha
    display_name: Alpha Bot
    address: {{print_qr: false}}
    plugins:
      - {{name: echo, path: auto-reply, config: {{echo: true}}}}
  - name: beta
    display_name: Beta Bot
    address: {{print_qr: false}}
    plugins:
      - {{name: echo, path: auto-reply, config: {{echo: true}}}}
""")
    swiftplex = os.path.join(BIN, "swiftplex")
    host = subprocess.Popen([swiftplex, "run", "--config", config, "--log-level", "warning"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    support.started.append(host)
    out = support.Lines(host.stdout)
    relay_address = out.wait_for(r"relay: (\S+)", "the host prints its embedded relay").group(1)
    alpha_address = out.wait_for(r"bot alpha address: (\S+)", "the host prints alpha's address").group(1)
    beta_address = out.wait_for(r"bot beta address: (\S+)", "the host prints beta's address").group(1)
    check(alpha_address != beta_address, "each bot has its own address")
    admin_port = int(out.wait_for(r"admin API: http://127\.0\.0\.1:(\d+)", "the host prints its admin API address").group(1))
    out.wait_for(r"ready: 2 bots, 2 relay\(s\) connected", "the host is ready with both bots")
    base = f"http://127.0.0.1:{admin_port}"
    token = subprocess.run([swiftplex, "admin-token", "--config", config], capture_output=True, text=True, check=True).stdout.strip()

    person, person_port = support.start_chat(os.path.join(work, "person"), relay_address, "botsperson")
    p = support.Session(f"ws://127.0.0.1:{person_port}/")
    me = p.command("/user")
    check("user" in me, f"the person has a user ({me})")
    person_user = me["user"]["userId"]

    driver, wait = open_browser()
    try:
        driver.get(base + "/")
        sign_in(driver, wait, token)
        wait.until(lambda d: d.find_element(By.ID, "bot-choice").is_displayed())
        chooser = Select(driver.find_element(By.ID, "bot-select"))
        check([o.get_attribute("value") for o in chooser.options] == ["alpha", "beta"], "the bot selector lists both bots, alpha first")
        check(chooser.first_selected_option.get_attribute("value") == "alpha", "the first bot is chosen at first")
        wait.until(lambda d: d.find_element(By.ID, "address-link").text == alpha_address)
        check(True, "alpha's address is shown")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#plugins tr[data-instance='echo']")) == 2)
        bots = sorted(r.get_attribute("data-bot") for r in driver.find_elements(By.CSS_SELECTOR, "#plugins tr[data-instance='echo']"))
        check(bots == ["alpha", "beta"], "the plugins table shows each bot's echo with its bot")
        wait.until(lambda d: d.find_element(By.ID, "ready-pill").text == "ready")
        check("alpha" in driver.find_element(By.CSS_SELECTOR, "#status dd[data-key='Bots']").text, "the status lists the bots")

        chooser.select_by_value("beta")
        wait.until(lambda d: d.find_element(By.ID, "address-link").text == beta_address)
        check(True, "choosing beta shows beta's address")
        wait.until(lambda d: d.find_element(By.ID, "events-state").text == "live")
        joined = p.command(f"/_connect {person_user} {beta_address}")
        check(joined.get("type") != "chatCmdError", "the person asks beta to connect")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#requests li[data-request]"))
        request = driver.find_element(By.CSS_SELECTOR, "#requests li[data-request]")
        check("botsperson" in request.text, "the request to beta appears live")
        request.find_element(By.CSS_SELECTOR, "button.accept").click()
        connected = p.event("contactConnected")
        check(connected["contact"]["profile"]["displayName"] == "Beta Bot", "accepting in the page connects the person to beta")
        wait.until(lambda d: any("botsperson" in li.text for li in d.find_elements(By.CSS_SELECTOR, "#contacts li[data-contact]")))
        check(True, "the person is one of beta's contacts")

        chooser.select_by_value("alpha")
        wait.until(lambda d: d.find_element(By.ID, "address-link").text == alpha_address)
        wait.until(lambda d: any("no contacts yet" in li.text for li in d.find_elements(By.CSS_SELECTOR, "#contacts li")))
        check(True, "alpha has no contacts: the person is beta's only")

        driver.find_element(By.CSS_SELECTOR, "#plugins tr[data-bot='beta'][data-instance='echo'] button.reload").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#reload-result span[data-instance='echo']"))
        spans = driver.find_elements(By.CSS_SELECTOR, "#reload-result span[data-instance='echo']")
        check([s.get_attribute("data-bot") for s in spans] == ["beta"], "reloading beta's echo reloads only beta's")

        os.makedirs(ARTIFACTS, exist_ok=True)
        shot = os.path.join(ARTIFACTS, "dashboard-bots.png")
        check(driver.save_screenshot(shot) and os.path.getsize(shot) > 10_000, f"screenshot kept: {shot}")
    finally:
        driver.quit()
        support.started.pop()
    p.ws.close()
    person.stdin.close()
    support.stop(person)
    support.stop(host)


if __name__ == "__main__":
    run("python-dashboard-bots", main)
