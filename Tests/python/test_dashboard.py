"""End-to-end, in a real browser: the bot host's web dashboard (headless Chromium driven by
Selenium through Debian's chromium-driver).

Starts a real swiftplex-relay (TLS on loopback), a `swiftplex run` host with the admin API and an
auto-reply plugin, and a `swiftplex-chat -p 0` person; then, in the browser: loads the dashboard,
is asked for the token, signs in, sees the status (ready, one relay connected) and the plugin,
sees the person's contact request arrive live (the event WebSocket), accepts it, sees the person
become a contact, reloads the plugin and sees its outcome, runs a Chat API command, and checks the
address QR code rendered. A screenshot is kept as .build/test-artifacts/dashboard[-ENGINE].png.

The bot runs on the engine named by the first argument: `swiftplex` (the default, embedded in the
host), `libsimplex` (the project's libsimplex.so loaded by path, as SimpleX's would be) or
`websocket` (a separate `swiftplex-chat -p 0` process, as `simplex-chat -p` would be). The page
must work the same on each: it uses only the admin API, which uses only the bot API on a foreign
engine.

Run by `make python-test` with SIMPLEX_LIBS_DIR set to the build directory, once per engine.
Prints `python-dashboard[ on ENGINE]: N passed, 0 failed` and exits non-zero on the first failure.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_ws_api as support  # noqa: E402  (the process and WebSocket helpers)

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from harness import run

BIN = support.BIN
ARTIFACTS = os.path.join(os.environ.get("SWIFTPLEX_ARTIFACTS", ".build/test-artifacts"))
check = support.check


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1500"):
        options.add_argument(arg)
    service = Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(options=options, service=service)


def open_browser():
    """Headless Chromium, quit with the run's processes if the run fails; and its wait."""
    driver = browser()
    support.started.append(type("Quit", (), {"kill": lambda self: driver.quit()})())
    # The dashboard re-renders its lists as events arrive: an element read while it is replaced is
    # read again at the next poll, not a failure.
    return driver, WebDriverWait(driver, support.TIMEOUT, ignored_exceptions=(StaleElementReferenceException,))


def sign_in(driver, wait, token):
    """Enters the admin token on the dashboard's sign-in form and waits for the dashboard."""
    wait.until(lambda d: d.find_element(By.ID, "token").is_displayed())
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login").click()
    wait.until(lambda d: d.find_element(By.ID, "main").is_displayed())


ENGINES = ("swiftplex", "libsimplex", "websocket")
ENGINE = sys.argv[1] if len(sys.argv) > 1 else "swiftplex"
if ENGINE not in ENGINES:
    sys.exit(f"test_dashboard.py: unknown engine '{ENGINE}' (one of {', '.join(ENGINES)})")


engine_processes = []


def engine_yaml(work, relay_address):
    """The host configuration's `engine:` for ENGINE; on `websocket`, starts the engine process."""
    if ENGINE == "libsimplex":
        return f"""engine:
  type: libsimplex
  library: {os.path.join(BIN, "libsimplex.so")}
"""
    if ENGINE == "websocket":
        process, port = support.start_chat(os.path.join(work, "engine"), relay_address, "Dashboard Bot")
        engine_processes.append(process)
        return f"""engine:
  type: websocket
  url: ws://127.0.0.1:{port}
"""
    return ""


def main():
    work = tempfile.mkdtemp(prefix="swiftplex-dashboard-")
    relay = subprocess.Popen([os.path.join(BIN, "swiftplex-relay"), "--data-dir", os.path.join(work, "relay"),
                              "--listen", "127.0.0.1:0", "--log-level", "warning"], stdout=subprocess.PIPE, text=True)
    support.started.append(relay)
    relay_address = relay.stdout.readline().strip()
    check(relay_address.startswith("smp://"), "the relay printed its address")

    config = os.path.join(work, "host.yaml")
    with open(config, "w") as f:
        f.write(f"""data_dir: {os.path.join(work, "host")}
bot:
  display_name: Dashboard Bot
relays: ["{relay_address}"]
address:
  print_qr: false
admin:
  listen: 127.0.0.1:0
plugin_dirs: ["{BIN}"]
{engine_yaml(work, relay_address)}plugins:
  - name: echo
    path: auto-reply
    config:
      echo: true
""")
    swiftplex = os.path.join(BIN, "swiftplex")
    host = subprocess.Popen([swiftplex, "run", "--config", config, "--log-level", "warning"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    support.started.append(host)
    out = support.Lines(host.stdout)
    address = out.wait_for(r"bot address: (\S+)", "the host prints the bot's address").group(1)
    admin_port = int(out.wait_for(r"admin API: http://127\.0\.0\.1:(\d+)", "the host prints its admin API address").group(1))
    base = f"http://127.0.0.1:{admin_port}"
    token = subprocess.run([swiftplex, "admin-token", "--config", config], capture_output=True, text=True, check=True).stdout.strip()

    person, person_port = support.start_chat(os.path.join(work, "person"), relay_address, "dashperson")
    p = support.Session(f"ws://127.0.0.1:{person_port}/")
    person_user = p.command("/user")["user"]["userId"]

    driver, wait = open_browser()
    try:
        driver.get(base + "/")
        wait.until(lambda d: d.find_element(By.ID, "token").is_displayed())
        check(not driver.find_element(By.ID, "main").is_displayed(), "the dashboard asks for the token first, showing nothing else")

        driver.find_element(By.ID, "token").send_keys("not-the-token")
        driver.find_element(By.ID, "login").click()
        wait.until(lambda d: d.find_element(By.ID, "login-error").is_displayed())
        check("refused" in driver.find_element(By.ID, "login-error").text, "a wrong token is refused")

        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "login").click()
        wait.until(lambda d: d.find_element(By.ID, "main").is_displayed())
        check(driver.execute_script("return sessionStorage.getItem('swiftplex.adminToken')") == token,
              "the token is kept in the tab's session storage")
        wait.until(lambda d: d.find_element(By.ID, "ready-pill").text == "ready")
        check(True, "the status shows the host ready (engine running, relay connected)")
        check(driver.find_element(By.CSS_SELECTOR, "#status dd[data-key='Relays connected']").text.startswith("1 of 1"),
              "one relay of one connected")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#plugins tr[data-instance='echo']"))
        check("running" in driver.find_element(By.CSS_SELECTOR, "#plugins tr[data-instance='echo']").text, "the plugin is listed, running")
        wait.until(lambda d: d.find_element(By.ID, "events-state").text == "live")
        check(True, "the live event stream is open")
        wait.until(lambda d: d.execute_script("const i = document.getElementById('address-qr'); return i.complete && i.naturalWidth > 0"))
        check(driver.find_element(By.ID, "address-link").text == address, "the bot's address and its QR code are shown")

        # A real client asks to connect; the request arrives live, and is accepted in the page.
        joined = p.command(f"/_connect {person_user} {address}")
        check(joined.get("type") != "chatCmdError", "the person sends a contact request")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#requests li[data-request]"))
        request = driver.find_element(By.CSS_SELECTOR, "#requests li[data-request]")
        check("dashperson" in request.text, "the contact request appears without reloading the page")
        check(driver.find_elements(By.CSS_SELECTOR, "#events li[data-type='receivedContactRequest']"), "the event log shows it")
        request.find_element(By.CSS_SELECTOR, "button.accept").click()
        connected = p.event("contactConnected")
        check(connected["contact"]["profile"]["displayName"] == "Dashboard Bot", "accepting in the page connects the person")
        wait.until(lambda d: any("dashperson" in li.text for li in d.find_elements(By.CSS_SELECTOR, "#contacts li[data-contact]")))
        check(not driver.find_elements(By.CSS_SELECTOR, "#requests li[data-request]"), "the person is a contact; no request waits")

        # The plugin reloads from the page, with its outcome shown.
        driver.find_element(By.CSS_SELECTOR, "#plugins tr[data-instance='echo'] button.reload").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#reload-result span[data-instance='echo']"))
        outcome = driver.find_element(By.CSS_SELECTOR, "#reload-result span[data-instance='echo']").get_attribute("data-outcome")
        check(outcome in ("unchanged", "started"), f"the plugin reload's outcome is shown ({outcome})")

        # A Chat API command from the box.
        driver.find_element(By.ID, "command").send_keys("/user")
        driver.find_element(By.ID, "run").click()
        wait.until(lambda d: "activeUser" in d.find_element(By.ID, "command-output").text)
        check("Dashboard Bot" in driver.find_element(By.ID, "command-output").text, "a Chat API command is answered in the page")

        # Groups: made from the command box; the person joins; the card lists the group and its member.
        check(any("no groups yet" in li.text for li in driver.find_elements(By.CSS_SELECTOR, "#groups li")), "no groups at first")
        bot_user = json.loads(driver.find_element(By.ID, "command-output").text)["user"]["userId"]

        def run_command(cmd, expect):
            box = driver.find_element(By.ID, "command")
            box.clear()
            box.send_keys(cmd)
            driver.find_element(By.ID, "run").click()
            wait.until(lambda d: f'"type": "{expect}"' in d.find_element(By.ID, "command-output").text)
            return json.loads(driver.find_element(By.ID, "command-output").text)

        person_at_bot = run_command(f"/_contacts {bot_user}", "contactsList")["contacts"][0]["contactId"]
        group_id = run_command('/_group %d {"displayName":"ops","fullName":""}' % bot_user, "groupCreated")["groupInfo"]["groupId"]
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, f"#groups li[data-group='{group_id}']"))
        check("ops" in driver.find_element(By.CSS_SELECTOR, f"#groups li[data-group='{group_id}']").text, "the new group is listed")
        run_command(f"/_add #{group_id} {person_at_bot} member", "sentGroupInvitation")
        invitation = p.event("receivedGroupInvitation")
        joined = p.command("/_join #%d" % invitation["groupInfo"]["groupId"])
        check(joined.get("type") == "userAcceptedGroupSent", f"the person joins the group ({joined.get('type')})")
        wait.until(lambda d: any("connected" in li.text or "complete" in li.text for li in
                                 d.find_elements(By.CSS_SELECTOR, f"#groups li[data-group='{group_id}'] li[data-member]")))
        member = driver.find_element(By.CSS_SELECTOR, f"#groups li[data-group='{group_id}'] li[data-member]").text
        check("dashperson" in member and "member" in member, f"the group's member is shown with its role and state, live ({member})")

        os.makedirs(ARTIFACTS, exist_ok=True)
        shot = os.path.join(ARTIFACTS, "dashboard.png" if ENGINE == "swiftplex" else f"dashboard-{ENGINE}.png")
        check(driver.save_screenshot(shot) and os.path.getsize(shot) > 10_000, f"screenshot kept: {shot}")
    finally:
        driver.quit()
        support.started.pop()
    p.ws.close()
    person.stdin.close()
    support.stop(person)
    support.stop(host)
    for process in engine_processes:
        support.stop(process)
    support.stop(relay)


if __name__ == "__main__":
    run("python-dashboard" + ("" if ENGINE == "swiftplex" else f" on {ENGINE}"), main)
