"""The words fact recognition relies on: month names, currencies, units, stopwords, JSON key names.

Kept apart from the regular expressions (:mod:`ctxlife.facts.patterns`) so the vocabulary can be
read, reviewed and extended in one place. Regex fragments here are alternations, already escaped.
"""

from __future__ import annotations

import re

MONTH_NUMBERS: dict[str, int] = {
    "jan": 1,
    "january": 1,
    "feb": 2,
    "february": 2,
    "mar": 3,
    "march": 3,
    "apr": 4,
    "april": 4,
    "may": 5,
    "jun": 6,
    "june": 6,
    "jul": 7,
    "july": 7,
    "aug": 8,
    "august": 8,
    "sep": 9,
    "sept": 9,
    "september": 9,
    "oct": 10,
    "october": 10,
    "nov": 11,
    "november": 11,
    "dec": 12,
    "december": 12,
}
#: A month name or its abbreviation, as a regex fragment (matched case-sensitively, capitalised).
MONTH_NAME = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)"
)

CURRENCY_SYMBOLS = "$€£¥₹"
#: ISO currency codes written before or after an amount.
CURRENCY_CODES = "USD|EUR|GBP|JPY|CNY|RMB|INR|CAD|AUD|CHF"
#: Currency words written after an amount ("30 dollars").
CURRENCY_WORDS = "dollars?|euros?|pounds|cents|yuan|yen|rupees|美元|欧元|英镑|日元|港元|港币|人民币|元|円|원"

#: Words that scale an amount ("$1.2M", "3 billion").
SCALE_FACTORS: dict[str, int] = {
    "k": 1_000,
    "K": 1_000,
    "thousand": 1_000,
    "M": 1_000_000,
    "million": 1_000_000,
    "bn": 1_000_000_000,
    "billion": 1_000_000_000,
}
SCALE_WORDS = "k|K|M|bn|million|billion|thousand"

#: Units that make a number a fact ("120 kg", "3 bags").
UNITS = (
    # measures
    "kg|kgs|g|mg|t|lb|lbs|oz|km|m|cm|mm|mi|ft|mph|kmh|km/h|l|ml|gb|mb|kb|tb|gib|mib|kib|ms|sec|secs|"
    "seconds?|mins?|minutes?|hrs?|hours?|days?|weeks?|months?|years?|nights?|°c|°f|"
    "kilograms?|grams?|pounds?|kilometers?|kilometres?|meters?|metres?|miles?|feet|inches|liters?|litres?|"
    "bytes|tokens?|"
    # countable things that agents book/order/process
    "bags?|baggage|suitcases?|luggage|pieces?|items?|units?|passengers?|people|persons?|adults?|children|"
    "kids?|infants?|tickets?|seats?|rooms?|guests?|orders?|packages?|boxes|pallets?|users?|"
    "calls?|requests?|files?|rows?|records?|lines?|pages?|points?|stops?|stopovers?|legs?|flights?|"
    "certificates?|vouchers?|cards?|reservations?|bookings?|copies|times|"
    # CJK measures and counters (longest first: 个月 before 个)
    "公斤|千克|公里|千米|厘米|毫米|小时|分钟|个月|星期|周|天|晚|张|件|位|间|次|箱|人|个"
)
#: Plural or variant unit spellings and the singular a normalized fact uses.
SINGULAR_UNITS: dict[str, str] = {
    "people": "person",
    "children": "child",
    "feet": "ft",
    "inches": "in",
    "lbs": "lb",
    "kgs": "kg",
    "secs": "sec",
    "mins": "min",
    "hrs": "hr",
    "boxes": "box",
    "copies": "copy",
    "luggage": "bag",
    "baggage": "bag",
    "suitcases": "bag",
    "suitcase": "bag",
    "bags": "bag",
}

#: Words that announce a letters-only code ("booking code: KXPLMR", "code ABCXYZ").
CODE_ANNOUNCING_WORDS = (
    r"reservations?|confirmations?|bookings?|orders?|tickets?|codes?|IDs?|refs?|references?|locators?"
)
#: Words allowed between the announcing word and the code ("order number is ...").
CODE_ANNOUNCING_FILLERS = r"id|ids|ID|IDs|code|codes|number|numbers|no\.?|is|was|are|were|of|#|\*\*|:"

#: Upper-case alnum tokens that look like codes but are common technical words.
CODE_STOPWORDS = frozenset(
    "UTF8 UTF16 UTF32 SHA1 SHA224 SHA256 SHA384 SHA512 MD5 ISO8601 ISO9001 MP3 MP4 H264 H265 GPT3 GPT4 GPT4O "
    "GPT35 COVID19 IPV4 IPV6 OAUTH2 HTTP2 HTTP3 X86 X64 ARM64 AMD64 WIN32 WIN64 B2B B2C P2P I18N L10N A11Y K8S "
    "S3 EC2 Y2K 2FA MFA2 PS4 PS5 4K 8K 1080P 720P 3D 2D".split()
)
#: Letters after digits that make a token a quantity, not a code ("20KG", "5PM", "3D").
UNIT_SUFFIXES = frozenset(
    "ST ND RD TH AM PM K M B KG KM MB GB KB TB MS PX PT HZ KHZ MHZ GHZ MM CM LB LBS OZ MPH X D H S W V A".split()
)
#: Upper-case words (not codes) that the announced-code rule must not take.
CONTEXT_STOPWORDS = frozenset(
    "THE AND FOR WITH FROM THIS THAT YOUR YOURS HAVE WILL BEEN WERE THEIR THERE WHICH ABOUT AFTER BEFORE NUMBER "
    "NUMBERS CODE CODES JSON HTML HTTP HTTPS NONE NULL TRUE FALSE PLEASE THANK THANKS ERROR ERRORS TOTAL ORDER "
    "ORDERS BOOKING DETAILS STATUS PENDING ACTIVE CANCELLED CANCELED CONFIRMED UNKNOWN EMPTY VALID INVALID "
    "EXAMPLE".split()
)

#: JSON keys whose (short, single-token) string values are identifiers/codes.
ID_KEY_RE = re.compile(
    r"(?:^|_)(?:id|ids|uuid|guid|code|codes|number|no|num|ref|reference|locator|sku|"
    r"reservation|reservations|confirmation|order|orders|booking|bookings|ticket|tickets|"
    r"invoice|account)$",
    re.IGNORECASE,
)
#: JSON keys whose numeric values are money.
AMOUNT_KEY_RE = re.compile(
    r"(?:^|_)(?:amount|amounts|price|prices|cost|costs|fee|fees|total|balance|refund|refunds|paid|"
    r"charge|charges|subtotal|tax|payment|payments)(?:$|_)",
    re.IGNORECASE,
)
#: JSON keys whose numbers are counts, never money, even under a money-like parent key.
COUNT_KEY_RE = re.compile(r"bag|count|num|seat|quantity|qty|passenger|night|item|pieces", re.IGNORECASE)

#: Words after which a capitalised word (or two or three) is a person's name: "my name is Ada
#: Brandt", "passenger Lena Ortiz", "signed, Omar". Regex fragments, lower case; their first letter may
#: also be capitalised; the name itself must be. "from" counts only after a message word ("an email
#: from Omar"), not before a place.
NAME_CUES: tuple[str, ...] = (
    *"my name is|my name's|name is|name:|call me|this is|i am called|i'm called|named|called|signed".split("|"),
    *"attn:?|cc:?|ask|passengers?|travell?ers?|guests?|customers?|clients?|patients?|contacts?".split("|"),
    *"colleagues?|co-?workers?|managers?|supervisors?|boss|wife|husband|partner|son|daughter".split("|"),
    *"mother|mom|mum|father|dad|brother|sister|friend".split("|"),
    *(
        f"{w}s? from"
        for w in "message|email|e-mail|mail|note|call|letter|text|reply|request|ticket|invitation".split("|")
    ),
)
#: Titles that make the capitalised word after them a name ("Dr. Chen", "Ms Ruiz"); case-sensitive.
NAME_TITLES = r"Mr|Mrs|Ms|Miss|Mx|Dr|Prof|Professor|Sir|Dame"
#: Closings before a signature line ("Regards,\nOmar", "-- Omar").
SIGNATURE_CLOSINGS = r"best regards|kind regards|warm regards|regards|best|cheers|sincerely|thanks|thank you|yours"
#: Chinese cues before a name written in Han characters ("我叫张伟").
CJK_NAME_CUES = "我叫|我的名字是|我的名字叫|名字叫|名叫|联系人是|联系人|乘客"
#: Capitalised words that are not names even after a cue ("this is The ...", "contact Support on
#: Monday", "Passenger Details:"): pronouns, determiners, greetings, days, months, numerals, the
#: words of a team or a desk, and the labels of a form.
NOT_NAME_WORDS = frozenset(
    "a an the this that these those it its i me we us you he she they my your our their his her here there "
    "what when where why how who which if and but or so also just now then not no yes ok okay sure please "
    "hello hi hey dear thanks thank regards best cheers sincerely welcome sorry great good fine "
    "today tomorrow yesterday tonight morning afternoon evening night week weekend "
    "monday tuesday wednesday thursday friday saturday sunday "
    "january february march april may june july august september october november december "
    "support team service services customer customers sales admin administrator manager desk help helpdesk "
    "department office user users client account agent assistant bot system ai "
    "each every all any some none both other another one two three four five first last full new old next "
    "name names details detail info information change changes note notes date dob birth type class "
    "economy business basic do does did can could would should will "
    "mr mrs ms miss mx dr prof professor sir dame".split()
)
