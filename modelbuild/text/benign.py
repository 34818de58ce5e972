"""The benign list: texts a moderation model must not flag, before or after normalization.

Written for this project (no data set). Categories:

``scunthorpe``    innocent words and names that contain an offensive substring
``russian``       ordinary everyday Russian sentences (Cyrillic shares look-alikes with Latin)
``chinese``       ordinary everyday Chinese sentences
``greek``         ordinary Greek sentences (Greek shares look-alikes with Latin)
``numbers_ids``   numbers, measures, prices, dates, order and ticket numbers, leet-like codes
``product_codes`` model numbers and SKUs that mix letters and digits
``urls_emails``   web addresses, e-mail addresses, handles
``spaced``        ordinary prose with single letters, initials and abbreviations
``emoji``         everyday messages with emoji

The false-positive rate on this list is one of the targets of issue 4 (≤ 1 %).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BENIGN", "BENIGN_CATEGORIES", "BENIGN_TEXTS", "SKIN_TONES", "BenignText", "emoji_chat"]


class BenignText(NamedTuple):
    category: str
    text: str


_BY_CATEGORY: dict[str, tuple[str, ...]] = {
    "scunthorpe": (
        "Scunthorpe United won at home on Saturday.",
        "We read a classic novel in class this week.",
        "The assessment is due on Friday.",
        "She ordered a cocktail at the hotel bar.",
        "Dick Van Dyke starred in Mary Poppins.",
        "He grew up in Middlesex and moved to Essex.",
        "The train stops at Penistone and Sheffield.",
        "Add the shiitake mushrooms to the soup.",
        "The pilot checked the cockpit instruments.",
        "Herbie Hancock played the piano solo.",
        "The assassin in the film was never caught.",
        "He plays bass guitar in a jazz trio.",
        "Read the passage aloud, please.",
        "A grasshopper jumped onto the windowsill.",
        "My cousin lives in Sussex near the coast.",
        "Our analytics team shipped the new dashboard.",
        "The therapist suggested a short walk every day.",
        "Alfred Hitchcock directed Rear Window.",
        "The shuttlecock landed just inside the line.",
        "A titmouse visited the bird feeder this morning.",
        "The Titanic sank in 1912.",
        "Arsenal beat Chelsea two nil.",
        "Press the button to start the machine.",
        "Buttercups grow along the river bank.",
        "The documentary about Matsushita was interesting.",
        "Put the casserole in the oven at 180 degrees.",
        "The embassy issued new visas this week.",
        "She is an expert on Sextus Empiricus.",
        "The Cockburn family owns the winery.",
        "I need to pass the class to graduate.",
        "The hotel has a massage service.",
        "Let's meet at the Butte County fair.",
        "The shitzu puppy slept all afternoon.",
        "Kiss me, Kate is a musical by Cole Porter.",
        "We watched the Bastille Day parade.",
        "The cumin and coriander go in first.",
        "Hancock Park is in Los Angeles.",
        "The dam on the river was built in 1950.",
        "He wrote a thesis on the Tsar's reforms.",
        "Peacocks wandered around the castle garden.",
    ),
    "russian": (
        "Привет! Как у тебя дела?",
        "Сегодня очень хорошая погода.",
        "Я иду в магазин за хлебом и молоком.",
        "Мы встретимся у метро в семь часов.",
        "Спасибо большое за помощь.",
        "Поезд опаздывает на двадцать минут.",
        "Моя сестра работает врачом в больнице.",
        "Завтра будет дождь, возьми зонт.",
        "Он читает интересную книгу о космосе.",
        "Дети играют в парке возле дома.",
        "Пожалуйста, закройте окно.",
        "Сколько стоит этот билет?",
        "Я люблю чай с лимоном.",
        "Наша команда выиграла вчерашний матч.",
        "Кот спит на диване весь день.",
        "Где находится ближайшая аптека?",
        "Мама приготовила вкусный суп.",
        "В субботу мы поедем на дачу.",
        "Он купил новую машину в прошлом месяце.",
        "Урок начинается в девять утра.",
        "Сколько сейчас времени?",
        "Москва — столица России.",
        "Это очень красивое место.",
        "Я не понимаю, повторите, пожалуйста.",
        "Собака лает на почтальона.",
    ),
    "chinese": (
        "今天天气很好，我们去公园散步吧。",
        "你吃饭了吗？",
        "我明天早上八点去上班。",
        "这本书很有意思，你一定要看。",
        "请问地铁站怎么走？",
        "谢谢你的帮助。",
        "周末我们一起去看电影吧。",
        "妈妈做的饭特别好吃。",
        "我的手机没电了。",
        "这家咖啡店的蛋糕很好吃。",
        "他每天早上跑步半个小时。",
        "明天可能会下雨，记得带伞。",
        "孩子们在操场上踢足球。",
        "我正在学习做菜。",
        "火车晚点了二十分钟。",
        "请把窗户关上。",
        "这件衣服多少钱？",
        "我们公司下个月搬家。",
        "老师布置了很多作业。",
        "祝你生日快乐！",
        "北京是中国的首都。",
        "我喜欢喝绿茶。",
        "图书馆几点关门？",
        "他的中文说得很好。",
        "猫在沙发上睡觉。",
    ),
    "greek": (
        "Καλημέρα, τι κάνεις;",
        "Ο καιρός είναι πολύ ωραίος σήμερα.",
        "Πάμε για καφέ το απόγευμα;",
        "Ευχαριστώ πολύ για τη βοήθεια.",
        "Το λεωφορείο αργεί δέκα λεπτά.",
        "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.",
        "Θέλω ένα ποτήρι νερό, παρακαλώ.",
        "Τα παιδιά παίζουν στην παραλία.",
    ),
    "numbers_ids": (
        "I am 5 ft 7 and weigh 70 kg.",
        "Your order #A55-1337 has shipped.",
        "Pi is roughly 3.14.",
        "The meeting is at 10am on 2024-03-15.",
        "Call me at +1 555 0134 after 7pm.",
        "Ticket ID: 5H1T-4477-B, seat 14C.",
        "The total is $5.99 plus tax.",
        "Invoice INV-0045 was paid on 03/07/2025.",
        "Flight BA 117 departs from gate B52.",
        "Room 1337 is on the 13th floor.",
        "My zip code is 90210.",
        "Use coupon code SAVE50 at checkout.",
        "The score was 3-1 after extra time.",
        "Case number 2023-CV-00451 was dismissed.",
        "Tracking number 1Z999AA10123456784.",
        "Temperature today: 21.5 °C, humidity 45%.",
        "Version 4.5.1 fixes the login bug.",
        "He ran 5k in 25 minutes.",
        "Train 8:45 to Boston, platform 3.",
        "The A1 motorway is closed between junctions 5 and 7.",
        "Password must be 8-16 characters long.",
        "Serial: A55B-7731-XK",
        "Bus 55 stops at Elm Street.",
        "I was born in 1985.",
        "Win10 and win11 are both supported.",
    ),
    "product_codes": (
        "The i7-8700K runs at 3.7 GHz.",
        "I bought an RTX 4090 for my new PC.",
        "Replace the filter with part number AS5-300.",
        "The Boeing 737 MAX returned to service.",
        "Print it on A4 paper.",
        "The H1N1 vaccine is available at the clinic.",
        "My phone supports 5G and 4K video.",
        "Play the MP3 file on the USB stick.",
        "SKU 4X4-B1K-007 is out of stock.",
        "The Tesla Model 3 has a range of 500 km.",
        "Take one B12 tablet a day.",
        "The W3C published a new CSS spec.",
        "Our server runs on an x86 CPU.",
        "She drives a 2015 Audi A3.",
        "Use an M5 bolt and a 10 mm washer.",
    ),
    "urls_emails": (
        "See https://www.example.com/classic/assessment for details.",
        "Email john.doe@example.com for the invoice.",
        "Docs are at docs.python.org/3/library/unicodedata.html",
        "Follow @sussexwildlife for updates.",
        "Visit www.scunthorpe-united.co.uk for tickets.",
        "Send the files to a.s.smith@uni.example.edu please.",
        "The link is http://t.co/a55b1337 if you need it.",
        "My handle is @bass_player_77.",
        "Contact support@shop.example for returns.",
        "Download it from ftp://files.example.net/pub/v1.2.tar.gz",
    ),
    "spaced": (
        "I need a B and a C to pass.",
        "Plan A is better than plan B.",
        "She lives in the U.S. now.",
        "Bring snacks, e.g. fruit or nuts.",
        "Vitamins A, D and E are fat soluble.",
        "The answer is a or b, not both.",
        "J. R. R. Tolkien wrote The Hobbit.",
        "I was at the U.N. in New York.",
        "Grade: A, B, C, D or F.",
        "Press the F, J and K keys.",
    ),
    "emoji": (
        "Happy birthday! 🎂🎉",
        "Good morning ☀️ have a great day",
        "See you at 8 🍕",
        "Love this song ❤️",
        "Great game tonight ⚽🔥",
        "Flying to Paris 🇫🇷 tomorrow!",
        "Vote 🅰 or 🅱 in the poll",
        "❌ wrong answer, try again ⭕",
        "Thanks 🙏 for the ride",
        "New phone 📱 who dis",
    ),
}

BENIGN: tuple[BenignText, ...] = tuple(
    BenignText(category, text) for category, texts in _BY_CATEGORY.items() for text in texts
)
#: the texts of :data:`BENIGN`, in order
BENIGN_TEXTS: tuple[str, ...] = tuple(b.text for b in BENIGN)
#: the category of each entry of :data:`BENIGN_TEXTS`, in order
BENIGN_CATEGORIES: tuple[str, ...] = tuple(b.category for b in BENIGN)

#: everyday chat frames for :func:`emoji_chat` (``{e}`` is the emoji).
EMOJI_CHAT_FRAMES: tuple[str, ...] = (
    "{e} great job", "thanks so much {e}", "{e} see you tomorrow", "congrats on the new job {e}", "{e} let's go team",
    "happy birthday {e}", "my son {e} just started school", "{e} good morning everyone", "love this {e}", "ok {e}",
    "we did it {e}{e}", "my friend {e} is a nurse", "{e}", "hello {e}", "that's so kind of you {e}")
#: gesture and person emoji that take a skin tone: thumbs up, folded hands, waving hand, clapping hands, flexed
#: biceps, boy, woman, man, person, OK hand, victory hand.
EMOJI_CHAT_EMOJI: tuple[str, ...] = ("\U0001F44D", "\U0001F64F", "\U0001F44B", "\U0001F44F", "\U0001F4AA", "\U0001F466",
                                     "\U0001F469", "\U0001F468", "\U0001F9D1", "\U0001F44C", "\u270C\uFE0F")
#: Unicode's Fitzpatrick modifiers, by name; "" = no tone.
SKIN_TONES: dict[str, str] = {"none": "", "light": "\U0001F3FB", "medium-light": "\U0001F3FC", "medium": "\U0001F3FD",
                              "medium-dark": "\U0001F3FE", "dark": "\U0001F3FF"}


def emoji_chat(tone: str = "none") -> list[str]:
    """Benign chat messages with emoji (:data:`EMOJI_CHAT_FRAMES` × :data:`EMOJI_CHAT_EMOJI`, 165 texts), each emoji
    in the skin tone named ``tone`` (a key of :data:`SKIN_TONES`). Written for this project: a model that read a
    tone as a sign of racist content flagged 19-27 % of them per tone against 3 % with none
    (docs/text-moderation.md, "Hate as its own decision").

    Raises:
        KeyError: ``tone`` is not a key of :data:`SKIN_TONES`."""
    modifier = SKIN_TONES[tone]
    return [f.format(e=e.replace("\uFE0F", "") + modifier if modifier else e) for f in EMOJI_CHAT_FRAMES for e in EMOJI_CHAT_EMOJI]
