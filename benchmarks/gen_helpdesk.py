"""A fresh synthetic domain for held-out retention: an IT service-desk agent, with planted facts.

Nothing in ctxlife was tuned on this domain (it was written for issue 15, after the product code;
the veterinary clinic of ``synthetic_agent.py`` is the domain ``recall`` was tuned on). No ctxlife
code is involved in making a session, and the generator knows, by construction, every value that
is needed later and at which model call:

* **probe**: a later user question about a value the agent saw earlier (in a tool result or in
  something the user said): "What was the MAC address of laptop AT-4QX7K?". The need is at the
  call that answers the question;
* **reuse**: a later tool call that passes, verbatim, a value the agent read earlier ("reset
  Dana's password" -> ``reset_password({"employee_id": "u48213"})``, the id read from an
  employee lookup many turns before). The need is at the call that writes the tool call.

Messages are OpenAI chat format with native tool calls. Tool results mix JSON records, long JSON
work logs and plain-text log excerpts (a few hundred to ~1,500 tokens). A session of 60 user
turns is ~25-45k tokens and ~100 model calls.

    from gen_helpdesk import generate
    session = generate(seed=1)
    session.messages          # the recording
    session.needs             # [Need(call=index of the assistant message, answers=[[...]], origin, kind)]

Every need is checked after generation: its value occurs in the message it comes from, before the
call, and not in the current user turn; needs that fail the check are dropped (``Session.dropped``).
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from typing import Any

FIRST = [
    "Dana",
    "Priya",
    "Tomasz",
    "Aiko",
    "Mateo",
    "Ingrid",
    "Kwame",
    "Lucia",
    "Ravi",
    "Sunniva",
    "Bashir",
    "Marta",
    "Oskar",
    "Yusra",
    "Felipe",
    "Greta",
    "Hiro",
    "Nadia",
    "Elias",
    "Zofia",
]
LAST = [
    "Okonjo",
    "Varga",
    "Lindahl",
    "Brennan",
    "Castillo",
    "Haddad",
    "Kowalski",
    "Moreau",
    "Sundberg",
    "Tanaka",
    "Abara",
    "Delacroix",
    "Esposito",
    "Fitzgerald",
    "Grünwald",
    "Ishikawa",
]
DEPTS = ["finance", "legal", "design", "sales", "research", "support", "facilities", "payroll"]
SITES = ["Leeds", "Rotterdam", "Porto", "Gdansk", "Austin"]
MODELS = ["Latitude 7440", "ThinkPad T14 Gen 4", "EliteBook 840 G10", "MacBook Pro 14", "Surface Laptop 5"]
PRODUCTS = ["Visio Plan 2", "Acrobat Pro", "Tableau Creator", "AutoCAD LT", "Jira Software", "Figma Professional"]
SERVICES = ["VPN gateway", "SSO portal", "print server", "mail relay", "file shares", "Wi-Fi controller"]
ENGINEERS = ["K. Mensah", "L. Ferreira", "J. Novak", "S. Rahman", "E. Byrne"]
ERRORS = [
    ("0x80070643", "Fatal error during installation"),
    ("0x800f0922", "Update failed to install: boot partition"),
    ("0xC004F074", "The Key Management Service could not be contacted"),
    ("0x80190001", "An unexpected error occurred during sign-in"),
    ("0x8024402c", "Windows Update could not connect to the update service"),
    ("0x87D00324", "The application was not detected after installation completed"),
]
FILLER_LOG = [
    "svchost[{pid}]: Group Policy processing completed in {ms} ms",
    "NetworkProfile: connected to {ssid} (signal {sig}%)",
    "DHCP: lease renewed for adapter Ethernet 2",
    "Defender: signature update {sig}.{ms} applied",
    "OneDrive: sync completed, {ms} files up to date",
    "W32Time: time provider synchronised with dc0{sig}.corp.example",
    "Kerberos: ticket renewed for the logged-on user",
    "PrintService: job {pid} sent to queue FLOOR-{sig}",
]
CHAT = [
    (
        "How do I tell someone to clear their Teams cache?",
        "Ask them to quit Teams completely, open %appdata%\\Microsoft\\Teams (or the new Teams package folder), "
        "delete the Cache, blob_storage, databases, GPUCache, IndexedDB and Local Storage folders, "
        "then start Teams again. Sign-in details are kept, so they only need to wait for chats to reload.",
    ),
    (
        "What's a good way to explain MFA number matching to a new starter?",
        "Tell them: when you sign in, the screen shows a two-digit number; your phone asks for it. Type the number "
        "you see on the screen into the authenticator. If your phone asks and you did not just sign in, "
        "deny it and call us.",
    ),
    (
        "Draft a short message saying the print server will be down tonight.",
        "Here's a draft: 'Heads-up: printing will be unavailable tonight from 20:00 to 22:00 while we patch the print "
        "server. Jobs sent during that window will fail; please print anything urgent before 19:45. Thanks!'",
    ),
    (
        "Remind me what the standard laptop rebuild steps are.",
        "Back up the user's local folders, confirm OneDrive is in sync, suspend BitLocker, reimage from the current "
        "build over PXE, enrol in device management, install the department bundle, then restore data and check the "
        "VPN profile before handing it back.",
    ),
    ("Thanks, that's all for that one.", "You're welcome. What's next?"),
]


@dataclass
class Need:
    """A value needed at one model call: every answer group must have one of its strings in the context."""

    call: int  # index of the assistant message the model writes at that call
    answers: list[list[str]]
    origin: int  # index of the message the value was first given in
    kind: str  # "probe:<what>" or "reuse:<tool>"
    question: str = ""


@dataclass
class Session:
    seed: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    needs: list[Need] = field(default_factory=list)
    dropped: list[Need] = field(default_factory=list)


SYSTEM = (
    "You are the IT service-desk assistant of a mid-sized company. Use the tools to look up people, devices, "
    "tickets and logs, and to act on them. Confirm what you changed. Keep answers short."
)


class _Company:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        first = rng.sample(FIRST, 14)
        self.people = [self._person(name) for name in first]

    def unique(self, make: Any) -> str:
        while True:
            value = str(make())
            if value not in self.used:
                self.used.add(value)
                return value

    def _alnum(self, n: int, alphabet: str = string.ascii_uppercase + string.digits) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(n))

    def _person(self, first: str) -> dict[str, Any]:
        rng = self.rng
        last = rng.choice(LAST)
        dept = rng.choice(DEPTS)
        device = self.device(f"{first} {last}", dept)
        return {
            "employee_id": self.unique(lambda: f"u{rng.randint(10000, 99999)}"),
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}@corp.example",
            "department": dept,
            "site": rng.choice(SITES),
            "desk": self.unique(lambda: f"{rng.choice('ABCDE')}{rng.randint(1, 6)}-{rng.randint(10, 60)}"),
            "extension": self.unique(lambda: str(rng.randint(2000, 7999))),
            "manager": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            "account_status": rng.choice(["active", "active", "active", "locked (5 failed sign-ins)"]),
            "mfa_methods": rng.sample(["authenticator app", "FIDO2 key", "SMS", "phone call"], 2),
            "groups": rng.sample(
                ["all-staff", f"dept-{dept}", "vpn-users", "sharepoint-editors", "print-color", "remote-workers"], 3
            ),
            "device": device,
        }

    def device(self, owner: str, dept: str) -> dict[str, Any]:
        rng = self.rng
        return {
            "asset_tag": self.unique(lambda: f"AT-{self._alnum(5)}"),
            "hostname": self.unique(lambda: f"wks-{dept[:3]}-{rng.randint(1000, 9999)}"),
            "model": rng.choice(MODELS),
            "serial": self.unique(lambda: self._alnum(10)),
            "mac": self.unique(lambda: ":".join(f"{rng.randint(0, 255):02x}" for _ in range(6))),
            "ip": self.unique(lambda: f"10.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(2, 254)}"),
            "os_build": f"{rng.choice(['22631', '26100', '19045'])}.{rng.randint(1000, 4999)}",
            "recovery_key_id": self.unique(lambda: self._alnum(8, "0123456789ABCDEF")),
            "warranty_end": f"20{rng.randint(25, 29)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "last_seen": f"2025-02-{rng.randint(1, 28):02d}T{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}",
            "owner": owner,
            "compliance": rng.choice(["compliant", "compliant", "non-compliant: disk encryption pending"]),
        }

    def ticket(self, person: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        rng = self.rng
        number = self.unique(lambda: f"INC{rng.randint(1000000, 9999999)}")
        change = self.unique(lambda: f"CHG{rng.randint(1000000, 9999999)}")
        callback = self.unique(lambda: f"+44 113 496 {rng.randint(1000, 9999)}")
        engineer = rng.choice(ENGINEERS)
        topic = rng.choice(
            [
                "printer offline",
                "cannot map drive",
                "VPN drops",
                "Outlook keeps asking for password",
                "docking station not detected",
                "laptop fan loud",
            ]
        )
        worklog = []
        linked_at = rng.randint(2, 6)
        for i in range(rng.randint(7, 11)):
            when = f"2025-02-{rng.randint(1, 28):02d} {rng.randint(8, 18):02d}:{rng.randint(0, 59):02d}"
            if i == linked_at:
                text = f"Linked to {change}; the fix is scheduled in that change window."
            elif i == 1:
                text = f"User asked to be called back on {callback} rather than their desk phone."
            else:
                text = rng.choice(
                    [
                        "Remote session attempted; user not at desk.",
                        "Collected logs and attached them to the ticket.",
                        "Asked the user to restart and test again.",
                        "Checked group membership; nothing missing.",
                        "Escalated to second line for a closer look.",
                        "User confirmed the issue is intermittent.",
                        "Reinstalled the driver package from the software centre.",
                        "Waiting for the user's reply.",
                    ]
                )
            worklog.append({"at": when, "by": rng.choice(ENGINEERS), "note": text})
        record = {
            "number": number,
            "caller": person["name"],
            "short_description": topic,
            "state": rng.choice(["In progress", "On hold - awaiting caller", "Assigned"]),
            "priority": rng.choice(["P3", "P4"]),
            "assigned_to": engineer,
            "configuration_item": person["device"]["hostname"],
            "worklog": worklog,
        }
        return record, {"number": number, "change": change, "callback": callback}

    def logs(self, host: str) -> tuple[str, str, str] | None:
        rng = self.rng
        fresh = [e for e in ERRORS if e[0] not in self.used]
        if not fresh:
            return None
        code, text = rng.choice(fresh)
        self.used.add(code)
        lines = []
        error_at = rng.randint(10, 30)
        event_id = self.unique(lambda: str(rng.randint(10000, 65000)))
        for i in range(rng.randint(36, 60)):
            stamp = f"2025-02-27 {rng.randint(8, 17):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            if i == error_at:
                lines.append(f"{stamp} ERROR MsiInstaller[{event_id}]: {text} (code {code}) on {host}")
            else:
                filler = rng.choice(FILLER_LOG).format(
                    pid=rng.randint(1000, 9999), ms=rng.randint(80, 9000), ssid="CORP-WIFI", sig=rng.randint(1, 9)
                )
                lines.append(f"{stamp} INFO {filler}")
        return "\n".join(lines), code, event_id

    def licenses(self, product: str) -> tuple[str, str]:
        rng = self.rng
        po = self.unique(lambda: f"PO-{rng.randint(400000, 499999)}")
        seats = rng.randint(20, 60)
        rows = [
            f"License pool: {product}",
            f"Purchase order: {po}",
            f"Seats: {seats}",
            "",
            "seat | assigned to | since",
        ]
        for i in range(rng.randint(14, 24)):
            who = rng.choice(self.people)["name"]
            rows.append(f"{i + 1:>4} | {who} | 2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}")
        return "\n".join(rows), po


def _tool_turn(turn: int, name: str, args: dict[str, Any], result: Any, step: int = 0) -> list[dict[str, Any]]:
    call_id = f"call_{turn}_{step}_{name}"
    content = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": content},
    ]


def generate(seed: int = 1, turns: int = 60, min_gap: int = 8) -> Session:
    """One session of ``turns`` user turns; needs are asked/used ``min_gap`` or more turns after the value appeared."""
    rng = random.Random(f"helpdesk-{seed}")
    company = _Company(rng)
    session = Session(seed)
    msgs = session.messages
    msgs.append({"role": "system", "content": SYSTEM})
    # pending: (turn planted, kind, builder) - builder(turn) appends the later turn and returns its needs
    pending: list[tuple[int, str, Any]] = []
    looked_up: set[str] = set()

    def user(text: str) -> int:
        msgs.append({"role": "user", "content": text})
        return len(msgs) - 1

    def reply(text: str) -> int:
        msgs.append({"role": "assistant", "content": text})
        return len(msgs) - 1

    def probe(kind: str, question: str, value: str, origin: int, answer: str) -> Any:
        def ask(turn: int) -> None:
            user(question)
            call = reply(answer)
            session.needs.append(Need(call, [[value]], origin, f"probe:{kind}", question))

        return ask

    def reuse(kind: str, request: str, tool: str, args: dict[str, Any], value: str, origin: int, done: str) -> Any:
        def act(turn: int) -> None:
            user(request)
            msgs.extend(_tool_turn(turn, tool, args, {"status": "ok", "tool": tool}))
            call = len(msgs) - 2
            session.needs.append(Need(call, [[value]], origin, f"reuse:{tool}", request))
            reply(done)

        return act

    queue = f"Q-{rng.choice(['NET', 'EUC', 'IAM'])}{rng.randint(10, 99)}"
    origin = user(f"Morning. I'm on the {queue} queue today; I'll hand you requests as they come in.")
    reply("Good morning. Ready when you are.")
    pending.append(
        (
            0,
            "queue",
            probe(
                "queue", "Remind me, which queue did I say I'm on today?", queue, origin, f"You said you're on {queue}."
            ),
        )
    )

    for turn in range(1, turns):
        due = [p for p in pending if turn - p[0] >= min_gap]
        if due and (rng.random() < 0.4 or turn >= turns - 4):
            item = due[0]
            pending.remove(item)
            item[2](turn)
            continue
        kind = rng.choice(["person", "person", "device", "ticket", "logs", "licenses", "told", "chat", "chat"])
        person = rng.choice(company.people)
        if kind == "person":
            fresh = [p for p in company.people if p["employee_id"] not in looked_up]
            if not fresh:
                kind = "chat"
            else:
                person = rng.choice(fresh)
                looked_up.add(person["employee_id"])
        if kind == "person":
            user(
                rng.choice(
                    [
                        "Can you look up {name} in {dept}?",
                        "Who is {name}? Pull their directory entry.",
                        "{name} from {dept} is on the phone, get me their record.",
                    ]
                ).format(name=person["name"], dept=person["department"])
            )
            record = {k: v for k, v in person.items() if k != "device"}
            record["devices"] = [{"asset_tag": person["device"]["asset_tag"], "model": person["device"]["model"]}]
            msgs.extend(_tool_turn(turn, "lookup_employee", {"query": person["name"]}, record))
            origin = len(msgs) - 1
            reply(
                f"{person['name']} works in {person['department']} at the {person['site']} site; "
                f"account {person['account_status']}."
            )
            first = person["name"].split()[0]
            person_options = [
                (
                    "reuse",
                    lambda p=person, o=origin, f=first: reuse(
                        "id",
                        f"{f} {p['name'].split()[1]} says they're locked out. Reset their password.",
                        "reset_password",
                        {"employee_id": p["employee_id"]},
                        p["employee_id"],
                        o,
                        f"Done: a temporary password was sent to {f}'s manager.",
                    ),
                ),
                (
                    "reuse",
                    lambda p=person, o=origin, f=first: reuse(
                        "id",
                        f"Add {f} to the VPN users group, please.",
                        "add_to_group",
                        {"employee_id": p["employee_id"], "group": "vpn-users"},
                        p["employee_id"],
                        o,
                        f"{f} is now in vpn-users.",
                    ),
                ),
                (
                    "probe",
                    lambda p=person, o=origin, f=first: probe(
                        "desk",
                        f"Which desk is {f} at? I need to send someone over.",
                        p["desk"],
                        o,
                        f"{f} sits at desk {p['desk']}.",
                    ),
                ),
                (
                    "probe",
                    lambda p=person, o=origin, f=first: probe(
                        "extension",
                        f"What's {f}'s phone extension again?",
                        p["extension"],
                        o,
                        f"Extension {p['extension']}.",
                    ),
                ),
            ]
            pending.append((turn, "person", rng.choice(person_options)[1]()))  # type: ignore[no-untyped-call]
        elif kind == "device" and person["device"]["asset_tag"] not in looked_up:
            device = person["device"]
            looked_up.add(device["asset_tag"])
            user(f"Pull up the laptop with asset tag {device['asset_tag']}.")
            msgs.extend(_tool_turn(turn, "get_device", {"asset_tag": device["asset_tag"]}, device))
            origin = len(msgs) - 1
            reply(f"That's {device['owner']}'s {device['model']}; {device['compliance']}.")
            tag = device["asset_tag"]
            options = [
                lambda d=device, o=origin, t=tag: probe(
                    "mac", f"What was the MAC address of laptop {t}?", d["mac"], o, f"The MAC address was {d['mac']}."
                ),
                lambda d=device, o=origin, t=tag: probe(
                    "serial",
                    f"Vendor support wants the serial number of {t}. What was it?",
                    d["serial"],
                    o,
                    f"Serial {d['serial']}.",
                ),
                lambda d=device, o=origin, t=tag: probe(
                    "recovery",
                    f"The owner of {t} hit the BitLocker screen. Which recovery key ID did that laptop show?",
                    d["recovery_key_id"],
                    o,
                    f"Recovery key ID {d['recovery_key_id']}.",
                ),
                lambda d=device, o=origin, t=tag: reuse(
                    "hostname",
                    f"Push the new VPN profile to laptop {t}.",
                    "push_profile",
                    {"hostname": d["hostname"], "profile": "vpn-2025"},
                    d["hostname"],
                    o,
                    "The VPN profile is queued for that laptop.",
                ),
            ]
            pending.append((turn, "device", rng.choice(options)()))
        elif kind == "ticket":
            record, values = company.ticket(person)
            user(
                f"What's happening with {person['name']}'s ticket about the {record['short_description']}? "
                f"It's {values['number']}."
            )
            msgs.extend(_tool_turn(turn, "get_ticket", {"number": values["number"]}, record))
            origin = len(msgs) - 1
            reply(f"It's {record['state'].lower()}, assigned to {record['assigned_to']}.")
            first = person["name"].split()[0]
            options = [
                lambda v=values, o=origin, f=first: probe(
                    "change",
                    f"Which change request was {f}'s ticket linked to?",
                    v["change"],
                    o,
                    f"It was linked to {v['change']}.",
                ),
                lambda v=values, o=origin, f=first: probe(
                    "callback", f"What number did {f} want to be called back on?", v["callback"], o, f"{v['callback']}."
                ),
                lambda v=values, o=origin, f=first: reuse(
                    "ticket",
                    f"Add a note to {f}'s ticket: user will be remote until Friday.",
                    "add_ticket_note",
                    {"number": v["number"], "note": "User remote until Friday."},
                    v["number"],
                    o,
                    "Note added.",
                ),
            ]
            pending.append((turn, "ticket", rng.choice(options)()))
        elif kind == "logs" and person["device"]["hostname"] not in looked_up:
            host = person["device"]["hostname"]
            logs = company.logs(host)
            if logs is None:
                user("Thanks, that's all for that one.")
                reply("You're welcome. What's next?")
                continue
            looked_up.add(host)
            text, code, event = logs
            user(f"{person['name'].split()[0]}'s install keeps failing. Check the logs on {host}.")
            msgs.extend(_tool_turn(turn, "search_logs", {"host": host, "since": "2025-02-27T08:00"}, text))
            origin = len(msgs) - 1
            reply("There is one installer error in that window; the rest is routine.")
            options = [
                lambda c=code, o=origin, h=host: probe(
                    "error", f"What error code did the installer log on {h}?", c, o, f"Code {c}."
                ),
                lambda e=event, o=origin, h=host: probe(
                    "event",
                    f"For the vendor case: what was the MsiInstaller process id in the {h} error line?",
                    e,
                    o,
                    f"It was {e}.",
                ),
            ]
            pending.append((turn, "logs", rng.choice(options)()))
        elif kind == "licenses" and any(p not in looked_up for p in PRODUCTS):
            product = rng.choice([p for p in PRODUCTS if p not in looked_up])
            looked_up.add(product)
            text, po = company.licenses(product)
            user(f"How many {product} seats do we have, and who has them?")
            msgs.extend(_tool_turn(turn, "list_licenses", {"product": product}, text))
            origin = len(msgs) - 1
            reply(f"Here is the {product} pool with its current assignments.")
            pending.append(
                (
                    turn,
                    "licenses",
                    probe(
                        "po",
                        f"Finance asks which purchase order the {product} licenses were on.",
                        po,
                        origin,
                        f"Purchase order {po}.",
                    ),
                )
            )
        elif kind == "told":
            secret = company.unique(
                lambda: (
                    "-".join(
                        rng.sample(
                            [
                                "amber",
                                "falcon",
                                "cedar",
                                "orbit",
                                "lumen",
                                "harbor",
                                "quartz",
                                "tundra",
                                "willow",
                                "zephyr",
                            ],
                            2,
                        )
                    )
                    + f"-{rng.randint(10, 99)}"
                )
            )
            service = rng.choice(SERVICES)
            origin = user(f"For later: the {service} maintenance bridge code is {secret}. Don't lose it.")
            reply("Noted.")
            pending.append(
                (
                    turn,
                    "told",
                    probe(
                        "told",
                        f"What was the {service} bridge code I gave you?",
                        secret,
                        origin,
                        f"The bridge code was {secret}.",
                    ),
                )
            )
        else:
            question, answer = rng.choice(CHAT)
            user(question)
            reply(answer)
    _check(session)  # whatever is still pending at the end is never asked
    return session


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def _message_text(message: dict[str, Any]) -> str:
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or ():
        parts.append(call["function"]["arguments"])
    return _norm(" ".join(parts))


def _check(session: Session) -> None:
    """Keep needs whose value, before the call, occurs only in the turn it was planted in.

    ``origin`` becomes the first message holding the value (the user may give a ticket number that
    the agent then passes to a tool and reads back in the result: one turn, three messages).
    """
    messages = session.messages
    texts = [_message_text(m) for m in messages]
    starts = [i for i, m in enumerate(messages) if m["role"] == "user"]
    kept: list[Need] = []
    for need in session.needs:
        turn_start = max(i for i in starts if i <= need.origin)
        turn_end = min([i for i in starts if i > need.origin] + [len(messages)])
        ok = True
        first = need.origin
        for group in need.answers:
            values = [_norm(v) for v in group]
            where = {i for i in range(need.call) for v in values if v in texts[i]}
            ok = ok and need.origin in where and all(turn_start <= i < turn_end for i in where)
            first = min(where | {first})
        need.origin = first
        (kept if ok else session.dropped).append(need)
    session.needs = kept


if __name__ == "__main__":  # a quick look: sizes and needs
    import sys

    s = generate(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    print(len(s.messages), "messages,", len(s.needs), "needs,", len(s.dropped), "dropped")
    for n in s.needs:
        print(n.call, n.origin, n.kind, n.answers, "|", n.question)
