"""A small multilingual corpus for the tokenizer tests: CJK, Thai, Arabic, Cyrillic, Greek,
accented Latin in several languages, source code and English prose, recombined into rows
with near-duplicates (so top-10 answers have real neighbours)."""

from __future__ import annotations

import random

SENTENCES = [
    # English prose
    "The running dogs were quickly jumping over the lazy foxes in the gardens.",
    "Researchers have been studying how languages change over centuries of use.",
    "She said that the meetings would be held on Mondays and Thursdays this spring.",
    "Connections between the stations were running late because of heavy snowfall.",
    # accented Latin
    "Les enfants jouaient dans les jardins pendant que leurs parents parlaient.",
    "Die Häuser am Flussufer wurden während der Überschwemmung schwer beschädigt.",
    "Los niños estaban corriendo por las calles después de la celebración.",
    "As crianças estão aprendendo canções tradicionais com os avós.",
    "I bambini mangiavano gelati mentre passeggiavano lungo la spiaggia.",
    "Öğrenciler kütüphanede sessizce çalışıyorlardı ve sınavlara hazırlanıyorlardı.",
    "Młodzież często spędza wolny czas na świeżym powietrzu.",
    # Cyrillic, Greek, Arabic
    "Студенты читали интересные книги в большой городской библиотеке.",
    "Οι μαθητές διάβαζαν ενδιαφέροντα βιβλία στη μεγάλη βιβλιοθήκη.",
    "كان الطلاب يقرؤون الكتب المثيرة في المكتبة الكبيرة بالمدينة.",
    # CJK and Thai
    "東京タワーに行きました。とても楽しかったです。",
    "我们昨天在图书馆里读了很多有趣的书。",
    "서울의 봄은 정말 아름답고 따뜻합니다.",
    "นักเรียนกำลังอ่านหนังสือที่ห้องสมุดของโรงเรียน",
    # source code
    "def parseHTTPRequest(raw_bytes): return HttpRequest(raw_bytes.decode('utf-8'))",
    "for (int i = 0; i < n; ++i) { total += values[i] * weights[i]; }",
    "const fetchUserData = async (userId) => await api.get(`/users/${userId}`);",
    "SELECT user_id, COUNT(*) FROM orders WHERE created_at >= '2024-01-01' GROUP BY user_id;",
]


def rows(n: int, seed: int = 0) -> list[str | None]:
    """``n`` rows: 1-4 sentences each, a third of them a near-duplicate of an earlier row
    (one sentence dropped or one word swapped), a few NULL and empty rows."""
    rng = random.Random(seed)
    out: list[str | None] = []
    for i in range(n):
        if i % 97 == 5:
            out.append(None if i % 2 else "")
        elif out and rng.random() < 0.33:
            base = rng.choice([r for r in out[-50:] if r] or SENTENCES)
            words = base.split(" ")
            j = rng.randrange(len(words))
            words[j] = rng.choice(rng.choice(SENTENCES).split(" "))
            out.append(" ".join(words))
        else:
            out.append(" ".join(rng.sample(SENTENCES, rng.randint(1, 4))))
    return out
