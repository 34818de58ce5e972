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

The held-out sentences that measure them are :mod:`rtaudit.modelbuild.text.safety_benign`, in other words and
frames, never fitted. Texts that support, inform or recover about suicide were written as ``self-harm`` negatives and
measured, and are not fitted: they cost the suicidal goodbye note (docs/text-moderation.md, "Idioms and help texts").
"""

from __future__ import annotations

#: violent words in idioms of sport, performance, food, games and killing time (part of :data:`CONTRASTS`, negatives
#: of ``violence``).
IDIOMS: tuple[str, ...] = (
    # sport and training: doing well, scoring, playing ball
    "We killed it at the tournament this weekend.",
    "She's been crushing her workouts all month.",
    "Time to crush leg day, see you at the rack.",
    "I smashed my 5k time this morning.",
    "Go destroy your personal best at the race on Sunday!",
    "Let's shoot some baskets before dinner.",
    "Want to shoot hoops at the park on Saturday?",
    "The striker shot from thirty yards and scored.",
    "He shot a 72 on the back nine yesterday.",
    "We got murdered in the second half and lost four nil.",
    "Our team slaughtered them in the cup final.",
    "He knocked it out of the park with that last pitch.",
    "Kill it at your swim meet tomorrow!",
    "Let's go kill it at practice this afternoon.",
    "We shot some hoops in the driveway until it got dark.",
    "Shooting hoops with my cousins after class.",
    "Let's shoot a few rounds of basketball at lunch.",
    # performance, exams and work: doing very well
    "The drummer killed it at the open mic last night.",
    "You're going to slay that interview tomorrow.",
    "Go knock 'em dead at your recital!",
    "The comedian absolutely murdered the crowd tonight.",
    "Our choir slayed the final number.",
    "She crushed the job interview and got an offer the same day.",
    "I'm going to destroy this exam on Friday, I've studied for weeks.",
    "He smashed his sales target this quarter.",
    "We're killing it with the new product launch.",
    "Let's crush this deadline, team.",
    # food: eating with gusto, craving
    "I'm about to murder this plate of nachos.",
    "We totally destroyed that large pizza in ten minutes.",
    "I could kill for a cup of coffee right now.",
    "I'm going to smash a whole burrito after practice.",
    "He slays a bowl of ramen in under five minutes.",
    "I'm going to murder this sandwich, I skipped lunch.",
    "Gonna murder a big bowl of pasta tonight.",
    "I'm going to kill this steak, it smells amazing.",
    "Going to destroy this cheeseburger in about two bites.",
    # games: violence inside a game, between players
    "I got killed by a sniper in the last round, so annoying.",
    "Got a triple kill in the last match, best game ever.",
    "I keep dying on the same boss level.",
    "He killed the final boss on his first try.",
    "Respawn and go kill the dragon again, it drops better loot.",
    "We destroyed the other team in ranked tonight.",
    "Want to play a shooter game online later?",
    "My squad got wiped out in the final circle.",
    # killing time
    "Just killing time at the airport until boarding.",
    "Killing an hour at the bookshop before my train.",
    "Anything good to watch? I need to kill a couple of hours.",
)

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
) + IDIOMS
