"""A small Spanish -> English clinical lexicon for the deterministic relocator.

Written by hand for this project from the most frequent words of the CodiEsp
train and dev diagnosis mentions that cognate rules cannot reach (``dolor`` is
not like ``pain``). Keys are Spanish lemmas without accents, lower case,
masculine singular where the word inflects; values are the English words a
translation may use, also lower case and singular. Cognates (``hematuria``,
``pancreatitis``, ``infección``) need no entry: the relocator's suffix rules and
character similarity find them.
"""

from __future__ import annotations

_ENTRIES = """
dolor: pain ache aching painful pains tenderness
doloroso: painful pain tender tenderness
molestia: discomfort pain
enfermedad: disease illness disorder
fiebre: fever febrile pyrexia
febricula: fever low-grade febrile
febril: febrile fever
derecho: right
izquierdo: left
ambos: both bilateral
bilateral: bilateral both
adenopatia: lymphadenopathy adenopathy node nodes lymph lymphadenopathies adenopathies
adenomegalia: lymphadenopathy adenomegaly adenopathy enlarged lymph node
ganglio: node lymph ganglion
masa: mass
lesion: lesion injury
infeccion: infection
insuficiencia: insufficiency failure
fallo: failure
fracaso: failure
cronico: chronic
agudo: acute
riñon: kidney renal
rinon: kidney renal
perdida: loss
peso: weight
vomito: vomiting vomit emesis
sindrome: syndrome
traumatismo: trauma injury
ojo: eye ocular
ojos: eyes eye
debilidad: weakness
fumador: smoker smoking
fumadora: smoker smoking
exfumador: ex-smoker former smoker
tabaquismo: smoking smoker tobacco
tabaquico: smoking tobacco
cigarrillo: cigarette cigarettes
respiratorio: respiratory
vesical: bladder vesical
vejiga: bladder
vih: hiv
vhc: hcv hepatitis
vhb: hbv hepatitis
cmv: cmv cytomegalovirus
hta: hypertension hta htn
epoc: copd
iam: ami infarction
dm: dm diabetes
imc: bmi
itu: uti
tratamiento: treatment therapy
tipo: type
cefalea: headache cephalea
testiculo: testis testicle testicular
testicular: testicular testis testicle
teste: testis testicle testes
fractura: fracture
disnea: dyspnea dyspnoea breathlessness
neumonia: pneumonia
cardiopatia: heart cardiopathy cardiac disease
divertículo: diverticulum
diverticulo: diverticulum diverticula
absceso: abscess
vision: vision visual sight
mama: breast mammary
cuadro: picture condition symptoms
palidez: pallor paleness pale
derrame: effusion
inferior: lower inferior
superior: upper superior
venoso: venous vein
parestesia: paresthesia paraesthesia tingling paresthesias
herida: wound injury
dilatacion: dilatation dilation
tumoracion: tumor mass tumour swelling
palpacion: palpation
palpebral: eyelid palpebral lid
cutaneo: skin cutaneous
tos: cough
piel: skin
litiasis: lithiasis stone stones calculi
calculo: stone calculus
fibrilacion: fibrillation
auricular: atrial auricular
deficit: deficit deficiency
sangrado: bleeding
paresia: paresis weakness
nausea: nausea
parálisis: paralysis palsy
paralisis: paralysis palsy
gastrico: gastric stomach
muerte: death
depresion: depression
obesidad: obesity obese
hepatico: hepatic liver
osea: bone osseous
oseo: bone osseous
hueso: bone
dificultad: difficulty
caida: fall
miembro: limb member
hipocondrio: hypochondrium hypochondrial
urinario: urinary
hipotension: hypotension
isquemico: ischemic ischaemic
celula: cell
nivel: level
biliar: biliary bile
accidente: accident
infarto: infarction infarct attack
cancer: cancer
glandula: gland
varice: varices varicose varix
mareo: dizziness vertigo
pene: penis penile
cuerpo: body
retraso: delay retardation
nervio: nerve
irritacion: irritation
fumadora: smoker
deterioro: deterioration impairment decline worsening
sudoracion: sweating diaphoresis sweat sweats
agudeza: acuity
vena: vein
elevacion: elevation
septico: septic
region: region area
ictericia: jaundice icterus
distension: distension distention bloating
trastorno: disorder
quemadura: burn burns
disminucion: decrease decreased reduction reduced
secundario: secondary
metabolico: metabolic
aortico: aortic
desnutricion: malnutrition undernutrition
desprendimiento: detachment
retina: retina retinal
lingual: lingual tongue
malestar: malaise discomfort
pulmon: lung pulmonary
cicatriz: scar scarring
muslo: thigh
metastasico: metastatic
toracico: thoracic chest
nefropatia: nephropathy kidney disease
hepatopatia: liver hepatopathy disease
ulcera: ulcer
febricula: fever febrile
semana: week weeks
gestacion: gestation pregnancy gestational
ansiedad: anxiety
estreñimiento: constipation
estrenimiento: constipation
fosa: fossa
higado: liver hepatic
benigno: benign
habito: habit
alteracion: alteration disturbance abnormality change changes altered impaired
artrosis: osteoarthritis arthrosis
mano: hand
estrabismo: strabismus squint
caries: caries decay cavities cavity
transaminasa: transaminases transaminase aminotransferase
ulcus: ulcer ulcus
hiperuricemia: hyperuricemia hyperuricaemia
glande: glans
lumbalgia: pain lumbago
ganglios: nodes lymph
personal: personal
pie: foot feet
lobulo: lobe
ulceroso: ulcerative
estres: stress
asma: asthma
catarata: cataract
cuello: neck cervical
aumento: increase increased enlargement
cicatrizacion: healing
coledocolitiasis: choledocholithiasis
trasplante: transplant transplantation
hipertrofia: hypertrophy
inflamacion: inflammation
colico: colic
desorientacion: disorientation disoriented
esofago: esophagus oesophagus esophageal
leve: mild slight
marcha: gait walking
fovea: fovea pitting
convulsion: seizure seizures convulsion convulsions
coma: coma
lengua: tongue
borroso: blurred blurry
bucal: oral buccal mouth
hiato: hiatus hiatal
grave: severe serious
generalizado: generalized generalised widespread
funcion: function
alergia: allergy allergic
hombro: shoulder
sueño: sleep
sueno: sleep
cardiaco: cardiac heart
episodio: episode episodes
dislipemia: dyslipidemia dyslipidaemia dyslipemia
deshidratacion: dehydration dehydrated
somnolencia: drowsiness somnolence sleepiness
tromboembolismo: thromboembolism
luxacion: dislocation luxation
cuero: scalp
cabelludo: scalp
epigastrico: epigastric
intestino: intestine bowel intestinal
delgado: small
tiroides: thyroid
canino: canine
hemiescroto: hemiscrotum scrotal scrotum
repeticion: recurrent repeated repetitive
colestasis: cholestasis
trombopenia: thrombocytopenia thrombopenia
coagulacion: coagulation clotting
reumatoide: rheumatoid
espondilitis: spondylitis
cuidado: care
paliativo: palliative
quirurgico: surgical
bebedor: drinker drinking alcohol
vertigo: vertigo dizziness
ausencia: absence absent lack
indice: index
mioclonia: myoclonus myoclonic myoclonia
iliaco: iliac
sensacion: sensation feeling
asimetria: asymmetry asymmetric
cordon: cord
espermatico: spermatic
esofagico: esophageal oesophageal
vesicula: gallbladder vesicle
via: tract way route duct
medular: medullary spinal cord marrow
bloqueo: block
nefritico: nephritic renal
parada: arrest
confusional: confusional confusion
consumo: use consumption abuse
midriasis: mydriasis
agitacion: agitation
silla: wheelchair chair
rueda: wheelchair wheel
hemiparesia: hemiparesis
malabsorcion: malabsorption
heces: stool stools feces faeces
valvula: valve
extremidad: limb extremity
parotida: parotid
foto: photo
escalofrio: chills shivering
seno: sinus breast
nocturno: nocturnal night
cara: face facial
disfonia: dysphonia hoarseness
compresion: compression
anuria: anuria
coronario: coronary
oclusion: occlusion
estridor: stridor
hemoptisis: hemoptysis haemoptysis
cocaina: cocaine
optico: optic
tonico-clonico: tonic-clonic
rigidez: stiffness rigidity
yugal: jugal
angulo: angle
familiar: family familial
dedo: finger toe digit
rama: branch
tamaño: size
tamano: size
molestias: discomfort
arma: gun firearm weapon gunshot
fuego: gun fire firearm gunshot
sensibilidad: sensitivity sensation tenderness
escroto: scrotum scrotal
ictus: stroke
hipoacusia: hearing hypoacusis
sordera: deafness hearing
embarazo: pregnancy pregnant
parto: delivery birth labor labour
aborto: abortion miscarriage
sangre: blood
orina: urine
heces: stool feces
mujer: woman female
varon: male man
niño: child
nino: child
edad: age
año: year
ano: year anus anal
mes: month
dia: day
hora: hour
cabeza: head
pecho: chest breast
espalda: back
brazo: arm
pierna: leg
rodilla: knee
cadera: hip
tobillo: ankle
muñeca: wrist
muneca: wrist
codo: elbow
dientes: teeth tooth
diente: tooth teeth
boca: mouth oral
labio: lip
oreja: ear
oido: ear hearing
nariz: nose nasal
garganta: throat
corazon: heart cardiac
estomago: stomach gastric
pulmones: lungs
sin: without no
no: no not non
leucocitosis: leukocytosis leucocytosis
leucopenia: leukopenia leucopenia
vias: tract tracts ways
hinchazon: swelling
tumefaccion: swelling tumefaction
engrosamiento: thickening
aumentado: increased enlarged
agrandamiento: enlargement
estenosis: stenosis narrowing
sospecha: suspected suspicion
rotura: rupture tear
desgarro: tear laceration
quemado: burned burnt
dificil: difficult
cansancio: tiredness fatigue
nauseas: nausea
perdida: loss
abuso: abuse
alcoholismo: alcoholism
enolismo: alcoholism drinking alcohol
habito: habit
picor: itching pruritus
prurito: pruritus itching itch
escozor: burning itching
mancha: spot stain patch
bulto: lump mass
hemorragia: hemorrhage haemorrhage bleeding
hematoma: hematoma haematoma bruise
ampolla: blister
cicatricial: scar cicatricial scarring
mordedura: bite
picadura: sting bite
insomnio: insomnia
mialgia: myalgia muscle
artralgia: arthralgia joint
edema: edema oedema swelling
tumor: tumor tumour
neoplasia: neoplasm neoplasia tumor tumour
anemia: anemia anaemia
neoplasia: cancer
crisis: seizure seizures crisis crises attack attacks fit fits
comicial: seizure seizures epileptic
fumar: smoke smoked smoking smoker smokes
fumaba: smoked smoking smoker
fuma: smokes smoking smoker
fumador: smoked smokes
mantenimiento: maintenance
innato: inborn innate congenital
afectacion: involvement affectation affected affection
adherencia: adhesion adhesions
pared: wall
trasplante: transplant transplantation transplanted graft
encia: gum gingiva gingival gums
temblor: tremor tremors trembling
od: re od right
oi: le oi left
ao: be ou both
peneano: penile penis
rechazo: rejection rejected
antecedente: history
lado: side
tercio: third
miocardio: myocardial myocardium
sinusal: sinus
visual: visual vision
ictus: stroke
accidente: accident stroke
cerebrovascular: cerebrovascular stroke
habito: habit
tabaco: tobacco smoking
alcohol: alcohol
enolico: alcohol alcoholic ethanol
etilico: alcohol alcoholic ethanol
consumidor: consumer user
dependencia: dependence addiction
sobrepeso: overweight
obeso: obese obesity
malformacion: malformation
aneurisma: aneurysm
embolia: embolism
trombo: thrombus clot
cancer: cancer
tumoral: tumor tumour tumoral
mal: poor bad badly
estado: state status condition
general: general
portador: carrier
lado: side sides
renal: renal kidney kidneys
pulmonar: pulmonary lung lungs
lumbar: lumbar back low
dificultad: distress
suprarrenal: adrenal suprarenal
digestivo: digestive gastrointestinal gi
muscular: muscular muscle
profundo: deep
alucinacion: hallucination hallucinations
ferropenico: iron deficiency
ferropenia: iron deficiency
parpado: eyelid lid
ocular: ocular eye
erc: ckd crf ckd ckd
irc: crf ckd
ira: arf aki
fra: arf aki
ic: hf chf
icc: chf hf
tvp: dvt
tep: pe
acv: stroke cva
ave: stroke cva
hsa: sah
hsd: sdh
eii: ibd
fa: af afib
tce: tbi
les: sle lupus
sarm: mrsa
hbp: bph
ets: std sti
mav: avm
bajo: low decreased reduced poor
columna: spine column spinal
rectorragia: rectal bleeding rectorrhagia
caida: fallen falling
exantema: rash exanthema
prostatico: prostate prostatic
lues: syphilis lues
epigastralgia: epigastric pain epigastralgia
acufeno: tinnitus
sigma: sigmoid
erupcion: rash eruption
incendio: fire
sintoma: symptom symptoms
soplo: murmur
hipertenso: hypertensive hypertension
estenosis: stricture
duramadre: dura mater dural
fecal: fecal faecal
yeyuno: jejunum jejunal
extraño: foreign strange
extrano: foreign strange
flemon: phlegmon
hipopotasemia: hypokalemia hypokalaemia hypopotassemia
hiperpotasemia: hyperkalemia hyperkalaemia
alteracion: disorder disorders
ganglionar: nodal node lymph
linfatico: lymphatic lymph
tabaquico: smoking smoker tobacco
enolico: drinking
otitis: otitis
cerebral: cerebral brain
epidermoide: epidermoid squamous
ovarico: ovarian ovary
miccion: voiding urination micturition
miccional: voiding urinary micturition urination
retiniano: retinal retina
union: junction union
cirugia: surgery
conducto: duct canal
nicturia: nocturia
valvulopatia: valve valvular disease valvulopathy
tratado: treated
lagrimeo: lacrimation tearing watering
segundo: second
grado: degree grade
ciego: cecum caecum blind
yeyunal: jejunal
anexectomia: adnexectomy
pico: peak peaks spike spikes
pielocalicial: pyelocaliceal pyelocalyceal pelvicalyceal
urgencia: urgency emergency
habitual: regular habitual usual
corticoide: corticosteroid corticosteroids steroid steroids corticoid
rectitis: proctitis rectitis
criptorquidia: cryptorchidism
vertigo: vertigo
""".strip()

def _parse(text: str) -> dict[str, frozenset[str]]:
    lexicon: dict[str, set[str]] = {}
    for line in text.splitlines():
        spanish, _, english = line.partition(":")
        lexicon.setdefault(spanish.strip(), set()).update(english.split())
    return {key: frozenset(values) for key, values in lexicon.items()}


LEXICON: dict[str, frozenset[str]] = _parse(_ENTRIES)

# Function words a Spanish mention may contain; they need no English counterpart.
SPANISH_STOPWORDS = frozenset(
    """a al con de del e el en la las lo los o para por que se su sus u un una unas unos y
    entre sobre tras desde hasta hacia como""".split()
)

# English function words: a relocated span never starts or ends with one.
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be by for from in into is it its of on or the their this that to
    was were which with his her he she""".split()
)

# Words a mention may carry that a translation often leaves out without changing the
# diagnosis, each with the words that must then be present: "hipertensión arterial" is
# "hypertension" and "en tratamiento con hemodiálisis" is "on hemodialysis".
OPTIONAL_WORDS: dict[str, frozenset[str]] = {
    "arterial": frozenset({"hipertension", "hipotension"}),
    "personales": frozenset({"antecedentes"}),
    "personal": frozenset({"antecedente"}),
    "tratamiento": frozenset(),
    "cuadro": frozenset(),
    "habito": frozenset({"tabaquico", "enolico", "alcoholico"}),
}
