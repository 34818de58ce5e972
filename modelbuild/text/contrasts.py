"""Written contrast sentences: violent and deathly words in their everyday senses (training negatives).

Written for this project (no data set), like the functional suite, and used only as *training*
negatives of ``violence`` and ``self-harm`` (:func:`rtaudit.modelbuild.text.training_data.english_examples`):
the public threat and self-harm sets (ThreatGram 101, the Suicide Detection posts) have almost no
figurative uses of "kill", "shoot", "die" or "dead" among their negatives (about 50 rows in all the
public sets here), so without these the frozen encoder's linear head learnt the words rather than
the threat ("shoot me an email" 0.78, "I will kill it at the gym tomorrow" 0.72 as ``violence``).

Kept apart from every evaluation set: none of these texts is in the benign list
(:mod:`rtaudit.modelbuild.text.benign`), the functional suite (:mod:`rtaudit.modelbuild.text.functional`)
or the probes of :data:`rtaudit.modelbuild.text.evaluation.PROBES` (a unit test checks it), and each
sense is written differently from the probes' controls, so the probes measure generalisation to
new wordings. No threat or self-harm positive is written here: every positive comes from a public set.
"""

from __future__ import annotations

#: figurative or everyday uses of violent words: none is a threat or about self-harm.
CONTRASTS: tuple[str, ...] = (
    # kill
    "She absolutely killed it in the final round.",
    "You killed that presentation this morning, well done!",
    "We're going to kill it at the concert on Friday.",
    "That joke killed, the whole room was laughing.",
    "Let's kill some time at the mall before the movie.",
    "These new shoes are killing my feet.",
    "My back is killing me after moving all those boxes.",
    "Kill the engine before you get out of the car.",
    "Can you kill the lights when you leave?",
    "Run kill -9 on the stuck process and restart the server.",
    "The editor killed the story before it went to print.",
    "The committee killed the proposal in a single vote.",
    "Dressed to kill for the wedding tonight.",
    "Two birds, one stone: I'll pick up groceries on the way.",
    "This playlist is a killer, every track is great.",
    "The suspense in that episode was killing me.",
    "Curiosity killed the cat, but satisfaction brought it back.",
    "Her new album slaps, the second track kills.",
    "That chocolate cake was to die for.",
    # shoot, shot, gun, fire, bomb
    "Shoot me a message when you land.",
    "Just shoot me a text if you need anything.",
    "Feel free to shoot over your questions before the call.",
    "Shoot me your CV by Friday and I'll pass it on.",
    "Can you shoot me the link to the slides?",
    "Shoot me a DM with the details.",
    "We shot the whole video in one afternoon.",
    "The photographer is shooting the wedding on Saturday.",
    "Shoot for the stars and aim high this year.",
    "Give it your best shot, you can do it.",
    "I'll take a shot at fixing the bug tonight.",
    "He shot up three inches over the summer.",
    "Prices shot through the roof after the storm.",
    "She's a straight shooter, you can trust her advice.",
    "Don't jump the gun, wait for the results.",
    "He's going great guns at his new job.",
    "Fire away, I'm ready for your questions.",
    "The manager fired two people for being late.",
    "Our new game is going to be the bomb.",
    "I totally bombed my driving test today.",
    "The comedy bombed at the box office.",
    "Her post blew up overnight, ten thousand likes.",
    "My phone is blowing up with messages.",
    # die, dead, death
    "I'm dying to try that new ramen place.",
    "We laughed so hard we nearly died.",
    "I'm dead, that meme is too funny.",
    "My phone died halfway through the call.",
    "The battery is dead, can you bring a charger?",
    "That trend died out years ago.",
    "The old tradition is slowly dying.",
    "He's dead set on moving to Canada.",
    "Bored to death in this meeting.",
    "I'm scared to death of spiders.",
    "She worked herself to death on that project, she needs a holiday.",
    "The town is dead on Sunday evenings.",
    "I could sleep like the dead after that hike.",
    "Over my dead body will I wear that sweater.",
    "That debate has been done to death.",
    # murder, slay, destroy, crush, beat, hurt, attack, execute
    "She slayed that dance routine.",
    "You slay every outfit you wear.",
    "The band murdered that cover, it was awful.",
    "Our team destroyed them five nil.",
    "She crushed her exam, top of the class.",
    "I have a crush on my lab partner.",
    "Nothing beats a cold drink on a hot day.",
    "I'm beat, going to bed early tonight.",
    "It wouldn't hurt to ask for a discount.",
    "My legs hurt after the marathon, but it was worth it.",
    "He had a heart attack last year and is fine now.",
    "We need to attack this problem from a new angle.",
    "Execute the script and check the logs.",
    "The team executed the plan perfectly.",
    "The punchline made everyone groan.",
    "I'll knock out the report before lunch.",
    "Hang the picture a little higher on the wall.",
    "Hang on, I'll be there in a minute.",
    "Let's hang out this weekend.",
    "The cook stabbed the potatoes with a fork to check them.",
    "Break a leg at your audition tomorrow!",
    "I'm going to smash this workout.",
    "The storm wrecked our weekend plans.",
    # self-directed hyperbole and endings that are not about ending a life
    "Kill me now, there is another meeting after this one.",
    "Ugh, I want to disappear under my duvet until Monday.",
    "I'm so embarrassed I could crawl into a hole.",
    "I want to end my subscription, how do I cancel?",
    "I'm going to end my shift early today.",
    "I need to cut myself a slice of that cake.",
    "I'm drowning in homework this week.",
    "This commute is slowly killing my soul, lol.",
    "I'm done with this level, it's impossible.",
    "I can't go on like this without coffee.",
    "My plants are dying, what am I doing wrong?",
    "I want to end this chapter of my life and start a new job.",
)
