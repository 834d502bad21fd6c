/* mathfn.c - the engine's own exp, log, pow, sin, cos, tanh, fma and roundf, so that every C library gives the same logits. */
/* glibc, MinGW's and Microsoft's libm round expf, tanhf, sinf, powf, ...
   differently (MinGW's fmaf is not even correctly rounded), so the same
   prompt gave other text on Windows than on Linux. These use only IEEE
   754's +, -, *, / in round-to-nearest, comparisons and bit manipulation
   through memcpy, so they give the same bits on every such machine and
   compiler:
   - expf: x = (32 k + j) ln2/32 + r, e^x = 2^k 2^(j/32) e^r, the table's
     2^(j/32) and e^r's Taylor polynomial in double (Tang's method);
   - exp: the same with 2^(j/32) in two doubles and a longer polynomial;
   - log: x = 2^k m, m within 1/256 of c, log x = k ln2 - log(1/c) +
     log1p(m/c - 1), m/c - 1 exact, the sums kept in two doubles;
   - pow: e^(y log x) from log's two doubles; powf, logf through these;
   - sin, cos: x = q pi/2 + r from 2/pi's bits by integer arithmetic (Payne
     and Hanek's method, exact enough for every float), Taylor in r;
   - tanh: (e^2x - 1) / (e^2x + 1) from exp, x (1 - x^2/3) near 0;
   - fmaf: the exact product in double, the sum rounded to odd, then to
     float (Boldo and Melquiond).
   The float functions are within 1 ulp (almost always correctly rounded),
   exp and log within 1 ulp; tests/test_mathfn.c checks both.
   Tables and constants are from tools/gen_mathfn.py, as decimals of at
   most 17 digits, which an Annex F compiler converts exactly.
   A fused multiply-add would round differently: each rounding step is its
   own statement, and platform.h's INFER__EXACT_FP* keep every compiler
   from contracting here (clang's FP_CONTRACT OFF, GCC's
   -ffp-contract=off in GNU modes, MSVC's fp_contract). Not covered: -ffast-math, an explicit -ffp-contract=fast (clang's ignores
   the pragma), and x87 arithmetic (FLT_EVAL_METHOD 2). */
#include "internal.h"

INFER__EXACT_FP_BEGIN /* platform.h: no contraction in these functions */

static uint64_t infer__math_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static double infer__math_double(uint64_t u) {
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static uint32_t infer__math_fbits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* 2^m for a normal double's exponent, -1022 <= m <= 1023 */
static double infer__math_pow2(int m) { return infer__math_double((uint64_t)(m + 1023) << 52); }

/* d rounded to float; +-inf where it rounds past FLT_MAX (from (2 - 2^-24) 2^127
   on, a conversion C leaves undefined) */
static float infer__math_to_float(double d) {
    if (d >= 3.4028235677973366e+38) return INFINITY;
    if (d <= -3.4028235677973366e+38) return -INFINITY;
    return (float)d;
}

/* ---- fma ---------------------------------------------------------------- */

static float infer__fmaf(float x, float y, float z) {
#if defined(INFER__HW_FMAF)
    return INFER__HW_FMAF(x, y, z); /* the CPU's instruction: correctly rounded as well */
#else
    INFER__EXACT_FP
    double p = (double)x * (double)y; /* exact: 24 + 24 bits fit in 53 */
    double zd = z, s = p + zd, bp, bz, e;
    uint64_t u = infer__math_bits(s);
    /* s = p + z rounded to double rounds to the float that p + z rounds to
       unless s is a midpoint between two floats (the low 29 bits 1000...)
       or a subnormal float's (from 2^-126 down); inf and nan pass too */
    if ((u & 0x1fffffffu) != 0x10000000u && (u & 0x7ff0000000000000ull) >= 897ull << 52) return infer__math_to_float(s);
    /* TwoSum: e = (p + z) - s exactly */
    bz = s - p;
    bp = s - bz;
    bz = zd - bz;
    bp = p - bp;
    e = bp + bz;
    /* rounded to odd, the double carries the sticky bit that a second
       rounding, to float's 24 bits, needs to be correct */
    if (e != 0) {
        if (!(u & 1)) s = infer__math_double((e > 0) == (s > 0) ? u + 1 : u - 1);
    }
    return infer__math_to_float(s);
#endif
}

/* ---- exp ---------------------------------------------------------------- */

/* 2^(j/32) = hi + lo, j = 0..31 */
static const double infer__exp2_32[32][2] = {
    {1.0, 0.0},
    {1.0218971486541166, 5.109225028973444e-17},
    {1.0442737824274138, 8.551889705537965e-17},
    {1.0671404006768237, -7.899853966841582e-17},
    {1.0905077326652577, -3.046782079812471e-17},
    {1.1143867425958924, 1.0410278456845571e-16},
    {1.1387886347566916, 8.912812676025408e-17},
    {1.1637248587775775, 3.8292048369240935e-17},
    {1.189207115002721, 3.982015231465646e-17},
    {1.215247359980469, -7.712630692681488e-17},
    {1.241857812073484, 4.658027591836937e-17},
    {1.2690509571917332, 2.667932131342186e-18},
    {1.2968395546510096, 2.5382502794888315e-17},
    {1.3252366431597413, -2.8587312100388614e-17},
    {1.3542555469368927, 7.70094837980299e-17},
    {1.383909881963832, -6.770511658794786e-17},
    {1.4142135623730951, -9.667293313452913e-17},
    {1.4451808069770467, -3.0237581349939873e-17},
    {1.4768261459394993, -3.483994556892796e-17},
    {1.5091644275934228, -1.016455327754295e-16},
    {1.5422108254079407, 7.949834809697621e-17},
    {1.5759808451078865, -1.0136916471278304e-17},
    {1.6104903319492543, 2.4707192569797888e-17},
    {1.645755478153965, -1.0125679913674773e-16},
    {1.681792830507429, 8.199010020581497e-17},
    {1.718619298122478, -1.851380418263111e-17},
    {1.7562521603732995, 2.960140695448873e-17},
    {1.7947090750031072, 1.8227458427912087e-17},
    {1.8340080864093424, 3.283107224245627e-17},
    {1.8741676341103, -6.122763413004143e-17},
    {1.9152065613971474, -1.0619946056195963e-16},
    {1.9571441241754002, 8.960767791036668e-17},
};

#define INFER__MATH_32_LN2 46.16624130844683     /* 32 / ln 2 */
#define INFER__MATH_SHIFT 6755399441055744.0     /* 1.5 * 2^52: z + it rounds z to an integer */
#define INFER__MATH_LN2_32_HI 0.021660849392446835 /* ln2/32 to 37 bits: k * it is exact for |k| < 2^16 */
#define INFER__MATH_LN2_32_LO 5.145609244655338e-14

static float infer__expf(float x) {
    INFER__EXACT_FP
    uint32_t ax = infer__math_fbits(x) & 0x7fffffffu;
    double z, kd, r, r2, a, b, t;
    uint64_t ki;
    if (ax >= 0x42b17218u) {                /* |x| >= 88.72283935546875, where e^x overflows float */
        if (ax > 0x7f800000u) return x + x; /* nan */
        if (x > 0) return INFINITY;
        if (x < -104.0f) return 0.0f; /* under 2^-150: rounds to 0 */
    }
    z = (double)x * INFER__MATH_32_LN2; /* x in units of ln2/32: rounded, but |z| < 4800 keeps that under 2^-40 of e^x */
    kd = z + INFER__MATH_SHIFT;         /* k = round(z) in the low bits of kd's */
    ki = infer__math_bits(kd);
    kd = kd - INFER__MATH_SHIFT;
    r = z - kd; /* exact, |r| <= 1/2 */
    /* 2^(r/32) - 1 = e^(r ln2/32) - 1 to degree 4 of its Taylor series, in r
       (c_i = (ln2/32)^i / i!): under 2^-39 of it */
    r2 = r * r;
    a = 0.0002345961982022468 * r;
    a = a + 0.02166084939249829;
    b = 9.172562701824643e-09 * r;
    b = b + 1.693850972437182e-06;
    b = b * r2;
    a = a + b;
    a = a * r;
    /* 2^(j/32), j = k mod 32, times 2^((k - j)/32), added to its exponent:
       kd's bits are 2^51 + k below its exponent's (k >= -2^51), so
       (bits >> 5) << 52 is (k - j) / 32 << 52 modulo 2^64 */
    t = infer__math_double(infer__math_bits(infer__exp2_32[ki & 31][0]) + (ki >> 5 << 52));
    a = a * t;
    a = a + t;
    return (float)a; /* at most about 3.4028e38 here */
}

/* e^(xh + xl), |xl| tiny against xh (a double-double exponent: pow's) */
static double infer__exp_dd(double xh, double xl) {
    INFER__EXACT_FP
    double z, kd, t, c, r, r2, a, b, d, th, v;
    uint64_t ki;
    int m;
    if (!(xh <= 709.782712893384)) return xh != xh ? xh + xh : INFINITY; /* the last x with e^x finite */
    if (!(xh >= -745.1332191019412)) return 0.0;                          /* under 2^-1075: rounds to 0 */
    z = xh * INFER__MATH_32_LN2;
    kd = z + INFER__MATH_SHIFT; /* k = round(z) in the low bits, as in expf */
    ki = infer__math_bits(kd);
    kd = kd - INFER__MATH_SHIFT;
    /* r = x - k ln2/32: the first product exact, the difference exact (within a factor 2) */
    t = kd * INFER__MATH_LN2_32_HI;
    t = xh - t;
    c = kd * INFER__MATH_LN2_32_LO;
    r = t - c;
    r = r + xl;
    /* e^r - 1, |r| <= 0.0109, to degree 7 of its Taylor series (under 2^-66) */
    r2 = r * r;
    a = r * 0.16666666666666666;
    a = a + 0.5;
    b = r * 0.008333333333333333;
    b = b + 0.041666666666666664;
    d = r * 0.0001984126984126984;
    d = d + 0.001388888888888889;
    d = d * r2;
    b = b + d;
    b = b * r2;
    a = a + b;
    a = a * r2;
    a = a + r;
    /* 2^(j/32) (1 + a) = hi + (hi a + lo), j = k mod 32 */
    th = infer__exp2_32[ki & 31][0];
    a = a * th;
    a = a + infer__exp2_32[ki & 31][1];
    v = th + a;
    /* times 2^m, m = (k - j)/32: 1.0's bits plus m << 52 (see expf) where
       2^m is normal; else in two steps */
    if (xh > -708.0 && xh < 709.0) return v * infer__math_double((ki >> 5 << 52) + 0x3ff0000000000000ull);
    m = (int)kd;
    m = (m - (int)(ki & 31)) / 32;
    if (m > 1023) return v * infer__math_pow2(1023) * 2.0; /* (m is 1024 at most) */
    if (m >= -1022) return v * infer__math_pow2(m);
    v = v * infer__math_pow2(m + 1000); /* subnormal: one rounding, in the last product */
    return v * infer__math_pow2(-1000);
}

static double infer__exp(double x) { return infer__exp_dd(x, 0.0); }

/* ---- log ---------------------------------------------------------------- */

/* For the top 7 fraction bits i of m1 in [1, 2) (m = m1, or m1 / 2 from
   1.5 on): 1/c to 26 bits for the centre c of m's interval (1 where m lies
   next to 1, so that log x near 1 is computed from m - 1 itself), and
   -log of that as hi + lo. */
static const double infer__log_128[128][3] = {
    {1.0, 0.0, 0.0},
    {0.988416999578476, 0.011650605927689121, -6.630929705526197e-19},
    {0.9808429181575775, 0.019342956440288255, -5.460903687032848e-19},
    {0.9733840227127075, 0.02697659561444399, 5.190196779751944e-20},
    {0.9660377502441406, 0.03455236660549865, -1.6591074810353439e-18},
    {0.9588015079498291, 0.042071203676138785, 7.70223626049732e-19},
    {0.9516728520393372, 0.04953394606531694, 8.241874847975147e-19},
    {0.9446494579315186, 0.05694136429294503, -2.5508646327238983e-18},
    {0.9377289414405823, 0.06429434674727633, -3.4365629034511773e-18},
    {0.9309090971946716, 0.07159364643492018, -5.3406671997039025e-18},
    {0.9241877198219299, 0.07884006799420343, -4.758075851626007e-18},
    {0.91756272315979, 0.08603433827312573, -3.801714013963987e-18},
    {0.9110320210456848, 0.09317723300325585, -1.2594312848715491e-18},
    {0.9045936465263367, 0.10026944548026394, -1.9380875027676037e-19},
    {0.8982456028461456, 0.10731174824552757, -5.2372516570302755e-18},
    {0.891986072063446, 0.11430476080267972, 4.486619260206456e-18},
    {0.8858131468296051, 0.12124924584476081, -6.146751464791453e-18},
    {0.8797250986099243, 0.12814580825643024, -2.2663286594936026e-18},
    {0.8737201392650604, 0.13499516139429116, -1.1471358989002478e-17},
    {0.8677965998649597, 0.14179792373462025, 8.207486394531378e-19},
    {0.8619528710842133, 0.1485546837293429, 4.490916902778265e-19},
    {0.8561872839927673, 0.1552661370601965, -3.4191295924233397e-19},
    {0.8504983484745026, 0.1619328089770271, -9.73493864591331e-18},
    {0.8448844850063324, 0.16855536510434294, 3.451544581837959e-18},
    {0.8393442630767822, 0.17513433119652658, -3.157786159421853e-18},
    {0.833876222372055, 0.1816703020598968, -5.338214667334103e-18},
    {0.8284789621829987, 0.1881638350957354, -9.133398321600313e-19},
    {0.8231511116027832, 0.19461548446347815, -7.551881600075077e-18},
    {0.8178913593292236, 0.20102576375571982, -6.67651220097426e-19},
    {0.8126984238624573, 0.2073951806090627, 4.461984841157736e-18},
    {0.8075709640979767, 0.2137243465107706, -8.120504122735257e-18},
    {0.8025078475475311, 0.22001364515035082, -6.820192400237467e-18},
    {0.7975077927112579, 0.22626367294610264, -3.581887397744996e-18},
    {0.7925696671009064, 0.2324748690806224, 1.6682648377900147e-18},
    {0.7876923084259033, 0.23864773691885244, -2.0465279269818756e-18},
    {0.7828746140003204, 0.2447827311907191, 1.215994463800708e-17},
    {0.7781155109405518, 0.250880294178616, 5.323875693201479e-18},
    {0.773413896560669, 0.256940931828823, 6.741561613026756e-18},
    {0.7687687575817108, 0.2629650600527967, 1.9020671796976435e-18},
    {0.7641791105270386, 0.2689530794292621, -3.61044372701045e-18},
    {0.7596439123153687, 0.274905491926396, -1.4786419947948877e-17},
    {0.755162239074707, 0.2808226666261781, -1.7888907041510426e-17},
    {0.7507331371307373, 0.2867050337352769, -3.2453416875072977e-18},
    {0.7463556826114655, 0.2925530060624218, -1.5628472419861292e-17},
    {0.7420289814472198, 0.2983669780233174, 1.3824679312675684e-17},
    {0.7377521693706512, 0.30414732464067185, 1.3291452458266635e-19},
    {0.733524352312088, 0.309894481797401, -1.7890682816365203e-17},
    {0.7293447256088257, 0.3156087841085775, -3.012703485534651e-18},
    {0.7252124547958374, 0.3212906259579117, 2.4394951661356662e-17},
    {0.7211267650127411, 0.3269403388258413, 1.5431900645304761e-18},
    {0.7170868217945099, 0.33255835534445166, -1.4185784849328316e-17},
    {0.7130919098854065, 0.3381449610053535, 1.180494772825642e-17},
    {0.7091412842273712, 0.3437004997670646, -2.3855935990213506e-17},
    {0.705234169960022, 0.3492253753497885, 2.1327477880860742e-17},
    {0.7013698518276215, 0.35471992505182826, -9.562455347318821e-18},
    {0.6975476741790771, 0.36018441754484654, -2.2627267128474086e-17},
    {0.6937669515609741, 0.36561917953752954, 2.0306147169282642e-17},
    {0.6900269687175751, 0.37102459705669966, -2.1271498173477915e-17},
    {0.6863270699977875, 0.37640098645653935, -7.861267650967282e-18},
    {0.6826666593551636, 0.381748592201058, 4.008877377600834e-18},
    {0.6790450811386108, 0.38706776019791606, 1.1347847787640538e-17},
    {0.6754617393016815, 0.3923587637460776, -2.1128533869422626e-17},
    {0.6719160079956055, 0.3976219343724288, -2.5709014011840695e-17},
    {0.6684073209762573, 0.40285752933426117, -1.471781691409689e-17},
    {1.3298701345920563, -0.2850812943023909, 4.801117473743659e-18},
    {1.3229974210262299, -0.2798999357932239, -1.1120741315407923e-17},
    {1.3161953687667847, -0.2747452783942631, -1.5998209738936554e-17},
    {1.3094629049301147, -0.26961705690506943, -2.2714523094960965e-17},
    {1.3027989864349365, -0.26451501642987557, 1.6227946447492043e-17},
    {1.296202540397644, -0.2594388668904746, 1.4019782139008135e-17},
    {1.2896725535392761, -0.2543883516864826, -1.4333197807791838e-17},
    {1.2832080125808716, -0.2493632023288782, -1.1488943310952509e-17},
    {1.2768079936504364, -0.2443632083849405, 5.22997763160116e-18},
    {1.270471453666687, -0.23938805494375223, -9.643353428028361e-18},
    {1.2641975283622742, -0.23443755595390817, -4.962160093041892e-18},
    {1.2579852640628815, -0.22951144442814864, -3.918425694061817e-18},
    {1.251833736896515, -0.22460946585349234, -4.270880795054973e-18},
    {1.2457420825958252, -0.21973140262703125, -9.896165146108114e-18},
    {1.2397094368934631, -0.2148770270726162, 1.1116692705327835e-17},
    {1.2337349355220795, -0.21004610137455748, -5.6866259537127165e-18},
    {1.2278177440166473, -0.2052384017855148, -5.4345893977021565e-18},
    {1.22195702791214, -0.20045369475640637, 1.2353341654209523e-17},
    {1.216152012348175, -0.19569178588560623, 7.887099540798125e-18},
    {1.2104018926620483, -0.19095244715738302, -1.2075931747962645e-17},
    {1.2047058939933777, -0.18623546577756261, -5.926715058682294e-18},
    {1.199063241481781, -0.18154061984354042, 1.36704763394657e-17},
    {1.1934731900691986, -0.17686770325931542, -6.942617793336324e-18},
    {1.1879350244998932, -0.17221652626281847, -1.319644804437864e-17},
    {1.1824480295181274, -0.16758689075059055, 1.067119202824717e-17},
    {1.177011489868164, -0.16297859022553338, -9.907185399120687e-18},
    {1.1716247200965881, -0.1583914351826071, -9.22777410156006e-18},
    {1.1662870049476624, -0.1538252025346953, -1.230176102784535e-17},
    {1.1609977185726166, -0.14927973766009123, -5.941860311257382e-18},
    {1.1557562053203583, -0.14475485295710402, 1.1713285267240936e-17},
    {1.150561809539795, -0.14025035311781583, -5.4399089453124235e-18},
    {1.145413875579834, -0.1357660350825518, -8.745721348826441e-18},
    {1.1403118073940277, -0.13130174026584418, -1.3559938564360558e-17},
    {1.135254979133606, -0.12685727692209559, 8.433456009584403e-19},
    {1.1302428245544434, -0.1224324986251512, 5.900502505958571e-18},
    {1.1252747178077698, -0.11802719945288401, 4.536024312077276e-18},
    {1.1203501224517822, -0.1136412457868352, -4.429545878422141e-18},
    {1.1154684126377106, -0.1092744177147227, 6.871395024460941e-18},
    {1.1106290817260742, -0.10492659508137522, -2.491598530392829e-18},
    {1.1058315336704254, -0.10059757112789669, -3.420633762540096e-18},
    {1.1010752618312836, -0.09628721310751641, -4.196118284614235e-18},
    {1.0963597297668457, -0.09199535526341693, -1.8945133569458343e-18},
    {1.0916844308376312, -0.08772185280973045, -1.1529418553278667e-18},
    {1.0870488286018372, -0.0834665276470457, -3.761152572785619e-18},
    {1.082452416419983, -0.07922922281056674, -6.635829297449895e-18},
    {1.0778947472572327, -0.07500983066733824, -7.137836657519014e-19},
    {1.073375254869461, -0.07080812745728554, 8.834415836647913e-19},
    {1.0688935220241547, -0.0666240218660341, -5.451442604086599e-18},
    {1.0644490718841553, -0.06245736191866589, -2.3295737805746e-19},
    {1.0600413978099823, -0.058307961899086325, 1.1101270798189034e-18},
    {1.0556701123714447, -0.05417574289138135, 2.285940173330675e-18},
    {1.051334708929062, -0.050060508301553015, 1.8208600637240275e-18},
    {1.0470347702503204, -0.04596214074511757, 3.1869736657073174e-18},
    {1.0427698493003845, -0.04188048944516062, 3.4151877524501434e-18},
    {1.038539558649063, -0.0378154557116382, -2.6205031852390125e-18},
    {1.034343421459198, -0.03376685001437797, 1.828375366881692e-18},
    {1.0301810801029205, -0.029734592714659322, 7.819667120591084e-19},
    {1.0260521173477173, -0.025718542093674437, -1.6907657241391857e-18},
    {1.0219560861587524, -0.02171852232482848, 1.4126034861653104e-18},
    {1.0178926587104797, -0.01773446925885306, -7.835368828106773e-19},
    {1.0138613879680634, -0.013766197568585445, -7.578961926162268e-19},
    {1.009861946105957, -0.009813634486840582, 7.6795041743216965e-19},
    {1.0058939158916473, -0.0058766147172047405, 2.6583110870509177e-19},
    {1.0, 0.0, 0.0},
};

/* s + e = a + b exactly (Knuth's TwoSum) */
#define INFER__MATH_TWO_SUM(a, b, s, e)        \
    do {                                      \
        double two_sum_bb, two_sum_aa;        \
        (s) = (a) + (b);                      \
        two_sum_bb = (s) - (a);               \
        two_sum_aa = (s) - two_sum_bb;        \
        two_sum_bb = (b) - two_sum_bb;        \
        two_sum_aa = (a) - two_sum_aa;        \
        (e) = two_sum_aa + two_sum_bb;        \
    } while (0)

/* log x as hi + *lo for a finite x > 0 (within about 2^-63 of it) */
static double infer__log_dd(double x, double *lo) {
    INFER__EXACT_FP
    uint64_t u = infer__math_bits(x);
    const double *c;
    double m, mh, a, b, rh, rl, hh, hl, sh, sl, r2, p, q, w, kh, s1, s2, s3, e1, e2, e3, l, hi;
    int k = 0, i;
    if (u < (1ull << 52)) { /* subnormal: scaled by 2^54 */
        u = infer__math_bits(x * 18014398509481984.0);
        k = -54;
    }
    k += (int)(u >> 52) - 1023;
    i = (int)(u >> 45) & 127;
    u = (u & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
    if (i >= 64) {                                          /* m in [0.75, 1): log x near 0 has no k ln2 to cancel */
        u -= 1ull << 52;
        k += 1;
    }
    c = infer__log_128[i];
    /* r = m / c - 1 = rh + rl exactly: m in halves of 26 and 27 bits, each
       product with 1/c's 26 bits exact, mh/c - 1 exact (within a factor 2) */
    m = infer__math_double(u);
    mh = infer__math_double(u & ~((1ull << 27) - 1));
    a = mh * c[0];
    a = a - 1.0;
    b = m - mh;
    b = b * c[0];
    INFER__MATH_TWO_SUM(a, b, rh, rl);
    /* log1p(r) = r - r^2/2 + r^3/3 - ... + r^9/9, |r| <= 1/128 (the rest
       under 2^-73): rh^2 exactly (Dekker's product of halves cut from the
       bits), the terms from r^3 on in double, rl adding rl (1 - rh) */
    hh = infer__math_double(infer__math_bits(rh) & ~((1ull << 27) - 1));
    hl = rh - hh;
    sh = rh * rh;
    sl = hh * hh;
    sl = sl - sh;
    w = hh * hl;
    w = w * 2.0;
    sl = sl + w;
    w = hl * hl;
    sl = sl + w;
    r2 = rh * rh;
    p = rh * 0.2;
    p = p - 0.25;
    p = p * rh;
    p = p + 0.3333333333333333;
    q = rh * 0.14285714285714285;
    q = q - 0.16666666666666666;
    w = rh * 0.1111111111111111;
    w = w - 0.125;
    w = w * r2;
    q = q + w;
    q = q * r2;
    q = q * rh; /* r^3 (-1/6 + r/7 - r^2/8 + r^3/9) */
    p = p + q;
    p = p * r2;
    p = p * rh;
    /* k ln2 + log(1/c) + rh - rh^2/2 + ... in two doubles: k ln2's high
       part (42 bits) is exact */
    kh = (double)k * 0.6931471805598903;
    INFER__MATH_TWO_SUM(kh, c[1], s1, e1);
    INFER__MATH_TWO_SUM(s1, rh, s2, e2);
    sh = sh * -0.5;
    INFER__MATH_TWO_SUM(s2, sh, s3, e3);
    w = rh * rl;
    w = rl - w;
    l = (double)k * 5.497923018708371e-14;
    l = l + c[2];
    l = l + w;
    sl = sl * -0.5;
    l = l + sl;
    l = l + p;
    e1 = e1 + e2;
    e1 = e1 + e3;
    l = l + e1;
    hi = s3 + l;
    *lo = hi - s3;
    *lo = l - *lo;
    return hi;
}

static double infer__log(double x) {
    double lo;
    if (!(x > 0 && x < INFINITY)) {
        if (x == 0) return -INFINITY;
        if (x > 0 || x != x) return x + x; /* inf, nan */
        return NAN;
    }
    return infer__log_dd(x, &lo);
}

static float infer__logf(float x) { return (float)infer__log((double)x); /* within 2^-28 of an ulp of float more */ }

/* ---- pow ---------------------------------------------------------------- */

/* y an integer: 1 odd, 0 even; -1 not an integer (y finite) */
static int infer__math_parity(double y) {
    double h;
    if (floor(y) != y) return -1;
    if (fabs(y) >= 9007199254740992.0) return 0; /* from 2^53 on every double is even */
    h = y * 0.5;
    return floor(h) != h;
}

/* x^y with C99's special cases (Annex F.9.4.4), e^(y log x) from log in two
   doubles: within about 1 ulp. */
static double infer__pow(double x, double y) {
    INFER__EXACT_FP
    double ax = fabs(x), sign = 1.0, lh, ll, p, yh, yl, lhh, lhl, e, w, th, tl;
    int odd;
    if (y == 0 || x == 1) return 1.0;
    if (x != x || y != y) return x + y;
    if (fabs(y) == INFINITY) {
        if (ax == 1) return 1.0;
        return (ax < 1) == (y > 0) ? 0.0 : INFINITY;
    }
    odd = infer__math_parity(y);
    if (ax == 0 || ax == INFINITY) {
        int neg = (infer__math_bits(x) >> 63) != 0, big = ax == INFINITY;
        double v = (y < 0) != big ? INFINITY : 0.0;
        return neg && odd == 1 ? -v : v;
    }
    if (x < 0) {
        if (odd < 0) return NAN;
        if (odd) sign = -1.0;
    }
    lh = infer__log_dd(ax, &ll);
    p = y * lh;
    if (!(fabs(p) <= 1000)) return p > 0 ? sign * INFINITY : sign * 0.0;
    /* y (lh + ll) = th + tl: y lh exactly as p + e (Dekker's product of
       halves cut from the bits: |y| < 2^63 here, no overflow) */
    yh = infer__math_double(infer__math_bits(y) & ~((1ull << 27) - 1));
    yl = y - yh;
    lhh = infer__math_double(infer__math_bits(lh) & ~((1ull << 27) - 1));
    lhl = lh - lhh;
    e = yh * lhh;
    e = e - p;
    w = yh * lhl;
    e = e + w;
    w = yl * lhh;
    e = e + w;
    w = yl * lhl;
    e = e + w;
    w = y * ll;
    tl = e + w;
    th = p + tl;
    w = th - p;
    tl = tl - w;
    return sign * infer__exp_dd(th, tl);
}

static float infer__powf(float x, float y) { return infer__math_to_float(infer__pow((double)x, (double)y)); }

/* ---- sin, cos ----------------------------------------------------------- */

/* 2/pi in 32-bit words: bits -31..0 (zero), then bits 1..224 after the binary point */
static const uint32_t infer__two_over_pi[8] = {0x00000000u, 0xa2f9836eu, 0x4e441529u, 0xfc2757d1u,
                                               0xf534ddc0u, 0xdb629599u, 0x3c439041u, 0xfe5163abu};

/* |x| (its bits ax: a finite float above pi/4) = (4n + *q) pi/2 + r, the
   returned r within pi/4 and about 2^-63 (absolute) of the true one.
   |x| = M 2^E with M of 24 bits; x 2/pi mod 4 needs 2/pi's bits from
   weight 2^(1 - E) on (those above add multiples of 4): 96 of them, times
   M, leave the quadrant and 64 bits of the fraction. No float lies closer
   to a multiple of pi/2 than 2^-29.2 (0x1.f37c8ap+95 does), so r is good
   to 2^-34 of itself or better. */
static double infer__math_reduce(uint32_t ax, unsigned *q) {
    const uint32_t *t = infer__two_over_pi;
    uint64_t mant = (ax & 0x7fffffu) | 0x800000u, w0, w1, w2, p0, p1, p2, lo, hi, f;
    int g = (int)(ax >> 23) - 150 + 30, i = g >> 5, off = g & 31; /* the window's first bit in the table */
    int64_t fs;
    w0 = ((uint64_t)t[i] << 32 | t[i + 1]) << off >> 32;
    w1 = ((uint64_t)t[i + 1] << 32 | t[i + 2]) << off >> 32;
    w2 = ((uint64_t)t[i + 2] << 32 | t[i + 3]) << off >> 32;
    p0 = mant * w0;
    p1 = mant * w1;
    p2 = mant * w2;
    lo = p2 + (p1 << 32);
    hi = p0 + (p1 >> 32) + (lo < p2); /* the 120-bit product hi:lo, its point after bit 94 */
    *q = (unsigned)(hi >> 30) & 3u;
    f = hi << 34 | lo >> 30;
    if (f >> 63) { /* a fraction of 1/2 or more: the next quadrant, r < 0 */
        *q = (*q + 1) & 3u;
        fs = -(int64_t)(~f) - 1;
    } else {
        fs = (int64_t)f;
    }
    return (double)fs * 8.515303950216386e-20; /* pi/2 * 2^-64 */
}

/* sin and cos of x, within 1 ulp; large arguments (RoPE's at long
   positions: 1e5 radians and more) reduced exactly as small ones. */
static void infer__sincosf(float x, float *sin_x, float *cos_x) {
    INFER__EXACT_FP
    uint32_t ax = infer__math_fbits(x) & 0x7fffffffu;
    unsigned q = 0;
    double r, r2, s, c, t;
    if (ax >= 0x7f800000u || ax == 0) {
        *sin_x = ax ? x - x : x; /* nan, or +-0 */
        *cos_x = ax ? x - x : 1.0f;
        return;
    }
    if (ax <= 0x3f490fdau) r = (double)x; /* |x| < pi/4 */
    else {
        r = infer__math_reduce(ax, &q);
        if (x < 0) { /* sin(-x) = -sin x, cos(-x) = cos x: the reduction of -x */
            r = -r;
            q = (4 - q) & 3u;
        }
    }
    /* Taylor to r^13 and r^12 for |r| <= pi/4 (under 2^-45 and 2^-41) */
    r2 = r * r;
    s = r2 * 1.6059043836821613e-10;
    s = s - 2.505210838544172e-08;
    s = s * r2;
    s = s + 2.755731922398589e-06;
    s = s * r2;
    s = s - 0.0001984126984126984;
    s = s * r2;
    s = s + 0.008333333333333333;
    s = s * r2;
    s = s - 0.16666666666666666;
    s = s * r2;
    s = s * r; /* the sign of r, so sin(-0) = -0 */
    s = s + r;
    c = r2 * 2.08767569878681e-09;
    c = c - 2.755731922398589e-07;
    c = c * r2;
    c = c + 2.48015873015873e-05;
    c = c * r2;
    c = c - 0.001388888888888889;
    c = c * r2;
    c = c + 0.041666666666666664;
    c = c * r2;
    c = c - 0.5;
    c = c * r2;
    c = c + 1.0;
    switch (q) {
    case 1: t = s, s = c, c = -t; break;
    case 2: s = -s, c = -c; break;
    case 3: t = s, s = -c, c = t; break;
    default: break;
    }
    *sin_x = (float)s;
    *cos_x = (float)c;
}

INFER__UNUSED static float infer__sinf(float x) {
    float s, c;
    infer__sincosf(x, &s, &c);
    return s;
}

INFER__UNUSED static float infer__cosf(float x) {
    float s, c;
    infer__sincosf(x, &s, &c);
    return c;
}

/* ---- tanh --------------------------------------------------------------- */

static float infer__tanhf(float x) {
    INFER__EXACT_FP
    uint32_t ax = infer__math_fbits(x) & 0x7fffffffu;
    double a, e, d;
    if (ax >= 0x41200000u) {                /* |x| >= 10: 1 - tanh under 2^-28 rounds to 1 */
        if (ax > 0x7f800000u) return x + x; /* nan */
        return x > 0 ? 1.0f : -1.0f;
    }
    a = (double)x;
    if (ax < 0x39800000u) { /* |x| < 2^-12: x (1 - x^2/3), the next term under 2^-50 */
        e = a * a;
        e = e * -0.3333333333333333;
        e = e + 1.0;
        return (float)(e * a);
    }
    /* e^2|x| - 1 keeps 41 bits or more from 2|x| >= 2^-11 on */
    e = infer__exp(2.0 * fabs(a));
    d = e + 1.0;
    e = e - 1.0;
    e = e / d;
    return (float)(x < 0 ? -e : e);
}

/* ---- round ---------------------------------------------------------------
   To the nearest integer, halves away from zero (C99's roundf): MinGW's
   rounds 0.49999997f up to 1 (it adds 0.5 and truncates), which moved the
   activations' Q8 blocks, and so SmolLM2's logits, on Windows. For |x| <
   2^23 the truncation is exact as an int32 and x - t, its fraction, too. */
static float infer__roundf(float x) {
    float a = x < 0 ? -x : x, t;
    if (!(a < 8388608.0f)) return x; /* an integer already, or inf, nan */
    t = (float)(int32_t)a;
    if (a - t >= 0.5f) t += 1.0f;
    return x < 0 ? -t : x == 0 ? x : t; /* -0.3 to -0, and -0 kept */
}

INFER__EXACT_FP_END
