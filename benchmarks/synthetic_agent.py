"""A synthetic agent session with planted facts: a veterinary clinic's front-desk assistant.

The agent fetches records with tools (patient records, lab panels, the day's appointments, drug
stock), and the user asks about a value from one of those records again 10 or more turns later
("What was the microchip number on Biscuit's record?"). The values are planted by the generator, so
the answer strings are known by construction, never extracted by ctxlife code.

Messages are OpenAI chat format with native tool calls: per turn a user message, an assistant
message calling one tool, the tool's result (JSON; lab panels and schedules are long, several
hundred to ~1,500 tokens), and the assistant's short reply (which does not repeat the planted value).

    from synthetic_agent import generate
    session = generate(seed=1)
    for turn in session.turns: ...          # turn.messages, turn.probe (None or a Probe)

Seeds make sessions: tune on some seeds, quote others (bench_recall uses seeds 1-3 as dev and
101-103 as held out).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

# fmt: off
# Vocabulary tables, kept in rows (one word a line would triple them).
PET_NAMES = [
    "Biscuit", "Juniper", "Pepper", "Mochi", "Waffles", "Clementine", "Bramble", "Noodle", "Tofu", "Pistachio",
    "Marmalade", "Sprocket", "Hazel", "Ziggy", "Quill", "Saffron", "Cobalt", "Dumpling", "Fennel", "Gizmo",
    "Nutmeg", "Oberon", "Pickles", "Rutabaga", "Sorrel", "Tamarind", "Umber", "Vesper", "Wasabi", "Yuzu",
]
OWNER_FIRST = ["Avery", "Bianca", "Caspar", "Delphine", "Emeric", "Fiona", "Gideon", "Harriet", "Ingrid", "Jasper",
               "Keziah", "Leopold", "Marisol", "Nikolai", "Ottilie", "Percival", "Rosalind", "Soren", "Thea", "Ulrich"]
OWNER_LAST = ["Abernathy", "Blackwood", "Castellanos", "Dunmore", "Everhart", "Fairweather", "Galloway", "Hargreave",
              "Ironside", "Jovanovic", "Kowalczyk", "Lindqvist", "Montague", "Nakamura", "Okonkwo", "Pemberton"]
SPECIES = [("dog", ["Border Collie", "Dachshund", "Labrador Retriever", "Shiba Inu", "Whippet", "Beagle"]),
           ("cat", ["Maine Coon", "Siamese", "Bengal", "Ragdoll", "British Shorthair"]),
           ("rabbit", ["Holland Lop", "Rex", "Lionhead"])]
DRUGS = ["meloxicam", "amoxicillin", "gabapentin", "maropitant", "cefovecin", "robenacoxib", "prednisolone",
         "enrofloxacin", "buprenorphine", "famotidine", "metronidazole", "trazodone"]
ALLERGIES = ["penicillin", "chicken protein", "sulfonamides", "flea saliva", "beef protein", "latex", "none known"]
VETS = ["Dr. Okafor", "Dr. Lindgren", "Dr. Marchetti", "Dr. Varga", "Dr. Sato"]
PANELS = {
    "chemistry": [("ALT", "U/L", 10, 100), ("AST", "U/L", 0, 50), ("ALP", "U/L", 20, 150), ("GGT", "U/L", 0, 11),
                  ("BUN", "mg/dL", 7, 27), ("Creatinine", "mg/dL", 0.5, 1.8), ("SDMA", "ug/dL", 0, 14),
                  ("Glucose", "mg/dL", 70, 143), ("Cholesterol", "mg/dL", 110, 320),
                  ("Total bilirubin", "mg/dL", 0, 0.9), ("Albumin", "g/dL", 2.3, 4.0), ("Globulin", "g/dL", 2.5, 4.5),
                  ("Calcium", "mg/dL", 7.9, 12.0), ("Phosphorus", "mg/dL", 2.5, 6.8), ("Sodium", "mmol/L", 144, 160),
                  ("Potassium", "mmol/L", 3.5, 5.8), ("Chloride", "mmol/L", 109, 122), ("Amylase", "U/L", 500, 1500),
                  ("Lipase", "U/L", 200, 1800)],
    "hematology": [("RBC", "M/uL", 5.5, 8.5), ("Hematocrit", "%", 37, 55), ("Hemoglobin", "g/dL", 12, 18),
                   ("MCV", "fL", 60, 77), ("MCH", "pg", 19.5, 24.5), ("MCHC", "g/dL", 32, 36),
                   ("WBC", "K/uL", 5.5, 16.9), ("Neutrophils", "K/uL", 2, 12), ("Lymphocytes", "K/uL", 0.5, 4.9),
                   ("Monocytes", "K/uL", 0.3, 2), ("Eosinophils", "K/uL", 0.1, 1.5), ("Basophils", "K/uL", 0, 0.1),
                   ("Platelets", "K/uL", 175, 500), ("Reticulocytes", "K/uL", 10, 110)],
}
# fmt: on


@dataclass
class Probe:
    """A later question about a planted value: it is answered when every answer group has a string in the context."""

    question: str
    answers: list[list[str]]
    fact_turn: int  # the turn whose tool result holds the value
    kind: str


@dataclass
class Turn:
    index: int
    messages: list[dict[str, Any]]  # user message first, then the agent's steps
    probe: Probe | None = None


@dataclass
class Session:
    seed: int
    turns: list[Turn] = field(default_factory=list)

    @property
    def probes(self) -> list[tuple[int, Probe]]:
        return [(t.index, t.probe) for t in self.turns if t.probe is not None]


class _Clinic:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()
        names = rng.sample(PET_NAMES, len(PET_NAMES))
        self.patients = [self._patient(name) for name in names[:14]]

    def unique(self, make: Any) -> str:
        while True:
            value = make()
            if value not in self.used:
                self.used.add(value)
                return value

    def _patient(self, name: str) -> dict[str, Any]:
        rng = self.rng
        species, breeds = rng.choice(SPECIES)
        return {
            "patient_id": self.unique(lambda: f"PT-{rng.randint(1000, 9999)}"),
            "name": name,
            "species": species,
            "breed": rng.choice(breeds),
            "sex": rng.choice(["female spayed", "male neutered", "female", "male"]),
            "date_of_birth": f"20{rng.randint(12, 22)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "weight_kg": round(rng.uniform(1.2, 38.0), 1),
            "microchip": self.unique(lambda: "".join(str(rng.randint(0, 9)) for _ in range(15))),
            "owner": {
                "name": f"{rng.choice(OWNER_FIRST)} {rng.choice(OWNER_LAST)}",
                "phone": self.unique(lambda: f"+1-555-{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"),
                "email_opt_in": rng.choice([True, False]),
            },
            "allergies": [rng.choice(ALLERGIES)],
            "insurance_policy": self.unique(
                lambda: f"VPI-{rng.randint(10, 99)}{rng.choice('KLMNPQRSTV')}{rng.randint(1000, 9999)}"
            ),
            "vaccinations": [
                {
                    "vaccine": v,
                    "given": f"2023-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                    "lot": f"L{rng.randint(10000, 99999)}",
                }
                for v in rng.sample(["rabies", "DHPP", "leptospirosis", "bordetella", "FVRCP", "RHDV2"], 3)
            ],
            "primary_vet": rng.choice(VETS),
            "notes": rng.choice(
                [
                    "Nervous at the scale; treats help.",
                    "Muzzle for nail trims.",
                    "Owner prefers morning slots.",
                    "History of ear infections.",
                    "Sensitive stomach; bland diet after procedures.",
                ]
            ),
        }

    def lab_panel(self, patient: dict[str, Any], panel: str) -> tuple[dict[str, Any], str]:
        rng = self.rng
        rows = []
        flagged = rng.randrange(len(PANELS[panel]))
        for i, (analyte, unit, low, high) in enumerate(PANELS[panel]):
            span = high - low
            if i == flagged:
                value = round(high + span * rng.uniform(0.6, 2.5), 1 if high < 20 else 0)
                flag = "HIGH"
            else:
                value = round(rng.uniform(low + span * 0.1, high - span * 0.1), 1 if high < 20 else 0)
                flag = ""
            value_text = f"{value:g}"
            rows.append(
                {"analyte": analyte, "value": value_text, "unit": unit, "reference": f"{low:g}-{high:g}", "flag": flag}
            )
        accession = self.unique(lambda: f"ACC-{rng.randint(100000, 999999)}")
        result = {
            "patient_id": patient["patient_id"],
            "patient": patient["name"],
            "panel": panel,
            "accession": accession,
            "collected": f"2024-03-{rng.randint(1, 28):02d}T{rng.randint(8, 17):02d}:{rng.choice(['05', '20', '40'])}",
            "analyzer": rng.choice(["Catalyst One", "ProCyte Dx", "VetScan VS2"]),
            "results": rows,
            "comment": "Hemolysis index within limits. Values outside the reference interval are flagged.",
        }
        row = rows[flagged]
        return result, f'"analyte": "{row["analyte"]}", "value": "{row["value"]}"'

    def schedule(self, day: str, featured: dict[str, Any]) -> tuple[dict[str, Any], str]:
        rng = self.rng
        slots = []
        featured_at = rng.randrange(16)
        featured_row = ""
        for i in range(16):
            others = [p for p in self.patients if p is not featured]
            patient = featured if i == featured_at else rng.choice(others)  # the featured pet: one slot
            room = f"Exam {rng.randint(1, 6)}"
            time = f"{8 + i // 2:02d}:{'00' if i % 2 == 0 else '30'}"
            if i == featured_at:
                featured_row = f'"time": "{time}", "patient": "{patient["name"]}"'
            slots.append(
                {
                    "time": time,
                    "patient": patient["name"],
                    "patient_id": patient["patient_id"],
                    "vet": rng.choice(VETS),
                    "room": room,
                    "reason": rng.choice(
                        [
                            "vaccines",
                            "dental cleaning",
                            "limping",
                            "skin itch",
                            "recheck",
                            "weight check",
                            "ear infection",
                            "pre-op bloods",
                        ]
                    ),
                }
            )
        return {"date": day, "clinic": "Riverside", "appointments": slots}, featured_row

    def stock(self, drug: str) -> tuple[dict[str, Any], str]:
        rng = self.rng
        lots = [
            {
                "lot": self.unique(lambda: f"{drug[:3].upper()}-{rng.randint(100, 999)}{rng.choice('ABCDEFGHJK')}"),
                "expires": f"202{rng.randint(4, 7)}-{rng.randint(1, 12):02d}",
                "units": rng.randint(0, 60),
                "location": rng.choice(["pharmacy shelf B", "fridge 2", "controlled safe", "pharmacy shelf D"]),
            }
            for _ in range(rng.randint(3, 5))
        ]
        first = min(lots, key=lambda lot: lot["expires"])
        return {"drug": drug, "lots": lots, "reorder_point": rng.randint(10, 30)}, first["lot"]


def _call(turn: int, name: str, args: dict[str, Any], result: Any, reply: str) -> list[dict[str, Any]]:
    call_id = f"call_{turn}_{name}"
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)},
        {"role": "assistant", "content": reply},
    ]


def generate(seed: int = 1, turns: int = 60, min_gap: int = 10) -> Session:
    """A session of ``turns`` user turns; about one in four is a probe about a value fetched 10+ turns earlier."""
    rng = random.Random(seed)
    clinic = _Clinic(rng)
    session = Session(seed)
    facts: list[tuple[int, Probe]] = []  # (turn it was planted, the probe to ask later)
    fetched: set[Any] = set()  # records and panels fetched: each once, so its values are in one place
    for index in range(turns):
        due = [f for f in facts if index - f[0] >= min_gap]
        if due and (rng.random() < 0.35 or index >= turns - 3):
            planted, probe = due[0]
            facts.remove(due[0])
            session.turns.append(Turn(index, [{"role": "user", "content": probe.question}], probe))
            continue
        kind = rng.choice(["record", "record", "lab", "schedule", "stock", "chat"])
        patient = rng.choice(clinic.patients)
        if kind == "record":
            unseen = [p for p in clinic.patients if p["patient_id"] not in fetched]
            if not unseen:
                kind = "chat"
            else:
                patient = rng.choice(unseen)
                fetched.add(patient["patient_id"])
        if kind == "lab":  # each panel of a pet once, so "its panel" means one result
            panels = [p for p in PANELS if (patient["patient_id"], p) not in fetched]
            if not panels:
                kind = "chat"
        if kind == "record":
            user = rng.choice(
                ["Pull up the record for {id}.", "Can you open {name}'s file ({id})?", "Look up patient {id} for me."]
            )
            user = user.format(id=patient["patient_id"], name=patient["name"])
            messages = [{"role": "user", "content": user}] + _call(
                index,
                "get_patient",
                {"patient_id": patient["patient_id"]},
                patient,
                f"Here is {patient['name']}'s record: a {patient['breed']} seen by {patient['primary_vet']}.",
            )
            field_, question, answers = rng.choice(
                [
                    (
                        "microchip",
                        f"What was the microchip number on {patient['name']}'s record?",
                        [[patient["microchip"]]],
                    ),
                    (
                        "phone",
                        f"What's the owner's phone number for {patient['name']}? You had the file open earlier.",
                        [[patient["owner"]["phone"]]],
                    ),
                    (
                        "policy",
                        f"Which insurance policy number did {patient['name']}'s record list?",
                        [[patient["insurance_policy"]]],
                    ),
                ]
            )
            facts.append((index, Probe(question, answers, index, f"record:{field_}")))
        elif kind == "lab":
            panel = rng.choice(panels)
            fetched.add((patient["patient_id"], panel))
            result, row = clinic.lab_panel(patient, panel)
            user = f"Get the latest {panel} panel for {patient['name']} ({patient['patient_id']})."
            messages = [{"role": "user", "content": user}] + _call(
                index,
                "get_lab_panel",
                {"patient_id": patient["patient_id"], "panel": panel},
                result,
                f"The {panel} panel for {patient['name']} is back; one value is outside the reference interval.",
            )
            question = f"On {patient['name']}'s {panel} panel, which value was flagged high, and what was it?"
            facts.append((index, Probe(question, [[row]], index, "lab")))
        elif kind == "schedule":
            day = f"2024-03-{rng.randint(1, 28):02d}"
            result, time = clinic.schedule(day, patient)
            user = f"What's on the schedule for {day}?"
            messages = [{"role": "user", "content": user}] + _call(
                index,
                "list_appointments",
                {"date": day},
                result,
                f"There are {len(result['appointments'])} appointments on {day}.",
            )
            question = f"What time was {patient['name']}'s appointment on the {day} schedule you pulled up?"
            facts.append((index, Probe(question, [[time]], index, "schedule")))
        elif kind == "stock":
            drug = rng.choice(DRUGS)
            result, lot = clinic.stock(drug)
            user = f"Do we have {drug} in stock?"
            messages = [{"role": "user", "content": user}] + _call(
                index,
                "check_inventory",
                {"drug": drug},
                result,
                f"Yes, {drug} is stocked in {len(result['lots'])} lots.",
            )
            question = f"Which {drug} lot expires first? You checked the stock earlier."
            facts.append((index, Probe(question, [[lot]], index, "stock")))
        else:
            user = rng.choice(
                [
                    "Thanks. Remind me to call the lab supplier tomorrow.",
                    "Can you draft a short reminder text for vaccine recalls?",
                    "How long should a dog fast before a dental cleaning?",
                    "What's a polite way to tell an owner we're running late?",
                ]
            )
            messages = [
                {"role": "user", "content": user},
                {
                    "role": "assistant",
                    "content": "Sure. "
                    + rng.choice(
                        [
                            "Usually nothing to eat after midnight; water is fine until the morning.",
                            "Here's a draft: 'Hi! Your pet is due for vaccines this month. Reply to book a slot.'",
                            "Noted: call the lab supplier tomorrow morning.",
                            "Try: 'We're running about 15 minutes behind today; thank you for your patience.'",
                        ]
                    ),
                },
            ]
        session.turns.append(Turn(index, messages))
    _drop_ambiguous(session)
    return session


def _drop_ambiguous(session: Session) -> None:
    """Keep only probes whose answer strings are in their fact turn and in no other turn."""
    texts = [" ".join(_text(m) for m in turn.messages) for turn in session.turns]
    for turn in session.turns:
        probe = turn.probe
        if probe is None:
            continue
        for group in probe.answers:
            where = {i for i, text in enumerate(texts) for answer in group if answer in text}
            if where != {probe.fact_turn}:
                turn.probe = None
                turn.messages = [
                    {"role": "user", "content": "Thanks, that's all for that one."},
                    {"role": "assistant", "content": "You're welcome."},
                ]
                break


def _text(message: dict[str, Any]) -> str:
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or ():
        parts.append(call["function"]["arguments"])
    return " ".join(parts)


if __name__ == "__main__":  # a quick look: sizes and probes
    s = generate(1)
    print(len(s.turns), "turns,", sum(len(t.messages) for t in s.turns), "messages,", len(s.probes), "probes")
    for i, p in s.probes:
        print(i, p.fact_turn, p.kind, p.question, p.answers)
