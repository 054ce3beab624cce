from dials.biropa import biropa_dial
from dials.bulela import bulela_dial
from dials.buta import buta_dial
from dials.danake import danake_dial
from dials.dasi import dasi_dial
from dials.denese import denese_dial
from dials.diteke import diteke_dial
from dials.fadoba import fadoba_dial
from dials.filebo import filebo_dial
from dials.fino import fino_dial
from dials.fupo import fupo_dial
from dials.futi import futi_dial
from dials.gabe import gabe_dial
from dials.galoti import galoti_dial
from dials.genine import genine_dial
from dials.gifu import gifu_dial
from dials.gunona import gunona_dial
from dials.kenu import kenu_dial
from dials.kenuge import kenuge_dial
from dials.kifi import kifi_dial
from dials.kuzavo import kuzavo_dial
from dials.lelali import lelali_dial
from dials.lesulo import lesulo_dial
from dials.logo import logo_dial
from dials.logusu import logusu_dial
from dials.lufu import lufu_dial
from dials.mami import mami_dial
from dials.merizo import merizo_dial
from dials.mibuti import mibuti_dial
from dials.mileze import mileze_dial
from dials.movomu import movomu_dial
from dials.muba import muba_dial
from dials.nalonu import nalonu_dial
from dials.naro import naro_dial
from dials.nedomo import nedomo_dial
from dials.nizova import nizova_dial
from dials.nono import nono_dial
from dials.nurobi import nurobi_dial
from dials.paseve import paseve_dial
from dials.pore import pore_dial
from dials.pula import pula_dial
from dials.puri import puri_dial
from dials.rabi import rabi_dial
from dials.raku import raku_dial
from dials.rinulo import rinulo_dial
from dials.rozobu import rozobu_dial
from dials.rupu import rupu_dial
from dials.sebubu import sebubu_dial
from dials.sotove import sotove_dial
from dials.suta import suta_dial
from dials.tavo import tavo_dial
from dials.tesani import tesani_dial
from dials.tosi import tosi_dial
from dials.toze import toze_dial
from dials.tukope import tukope_dial
from dials.tunude import tunude_dial
from dials.tupunu import tupunu_dial
from dials.vanage import vanage_dial
from dials.vigitu import vigitu_dial
from dials.volimi import volimi_dial
from dials.vuni import vuni_dial
from dials.zita import zita_dial
from dials.zokezi import zokezi_dial
from dials.zole import zole_dial


def test_biropa_dial_at_rest():
    assert biropa_dial(0) == 0


def test_bulela_dial_at_rest():
    assert bulela_dial(0) == 0


def test_buta_dial_at_rest():
    assert buta_dial(0) == 0


def test_danake_dial_at_rest():
    assert danake_dial(0) == 0


def test_dasi_dial_at_rest():
    assert dasi_dial(0) == 0


def test_denese_dial_at_rest():
    assert denese_dial(0) == 0


def test_diteke_dial_at_rest():
    assert diteke_dial(0) == 0


def test_fadoba_dial_at_rest():
    assert fadoba_dial(0) == 0


def test_filebo_dial_at_rest():
    assert filebo_dial(0) == 0


def test_fino_dial_at_rest():
    assert fino_dial(0) == 0


def test_fupo_dial_at_rest():
    assert fupo_dial(0) == 0


def test_futi_dial_at_rest():
    assert futi_dial(0) == 0


def test_gabe_dial_at_rest():
    assert gabe_dial(0) == 0


def test_galoti_dial_at_rest():
    assert galoti_dial(0) == 0


def test_genine_dial_at_rest():
    assert genine_dial(0) == 0


def test_gifu_dial_at_rest():
    assert gifu_dial(0) == 0


def test_gunona_dial_at_rest():
    assert gunona_dial(0) == 0


def test_kenu_dial_at_rest():
    assert kenu_dial(0) == 0


def test_kenuge_dial_at_rest():
    assert kenuge_dial(0) == 0


def test_kifi_dial_at_rest():
    assert kifi_dial(0) == 0


def test_kuzavo_dial_at_rest():
    assert kuzavo_dial(0) == 0


def test_lelali_dial_at_rest():
    assert lelali_dial(0) == 0


def test_lesulo_dial_at_rest():
    assert lesulo_dial(0) == 0


def test_logo_dial_at_rest():
    assert logo_dial(0) == 0


def test_logusu_dial_at_rest():
    assert logusu_dial(0) == 0


def test_lufu_dial_at_rest():
    assert lufu_dial(0) == 0


def test_mami_dial_at_rest():
    assert mami_dial(0) == 0


def test_merizo_dial_at_rest():
    assert merizo_dial(0) == 0


def test_mibuti_dial_at_rest():
    assert mibuti_dial(0) == 0


def test_mileze_dial_at_rest():
    assert mileze_dial(0) == 0


def test_movomu_dial_at_rest():
    assert movomu_dial(0) == 0


def test_muba_dial_at_rest():
    assert muba_dial(0) == 0


def test_nalonu_dial_at_rest():
    assert nalonu_dial(0) == 0


def test_naro_dial_at_rest():
    assert naro_dial(0) == 0


def test_nedomo_dial_at_rest():
    assert nedomo_dial(0) == 0


def test_nizova_dial_at_rest():
    assert nizova_dial(0) == 0


def test_nono_dial_at_rest():
    assert nono_dial(0) == 0


def test_nurobi_dial_at_rest():
    assert nurobi_dial(0) == 0


def test_paseve_dial_at_rest():
    assert paseve_dial(0) == 0


def test_pore_dial_at_rest():
    assert pore_dial(0) == 0


def test_pula_dial_at_rest():
    assert pula_dial(0) == 0


def test_puri_dial_at_rest():
    assert puri_dial(0) == 0


def test_rabi_dial_at_rest():
    assert rabi_dial(0) == 0


def test_raku_dial_at_rest():
    assert raku_dial(0) == 0


def test_rinulo_dial_at_rest():
    assert rinulo_dial(0) == 0


def test_rozobu_dial_at_rest():
    assert rozobu_dial(0) == 0


def test_rupu_dial_at_rest():
    assert rupu_dial(0) == 0


def test_sebubu_dial_at_rest():
    assert sebubu_dial(0) == 0


def test_sotove_dial_at_rest():
    assert sotove_dial(0) == 0


def test_suta_dial_at_rest():
    assert suta_dial(0) == 0


def test_tavo_dial_at_rest():
    assert tavo_dial(0) == 0


def test_tesani_dial_at_rest():
    assert tesani_dial(0) == 0


def test_tosi_dial_at_rest():
    assert tosi_dial(0) == 0


def test_toze_dial_at_rest():
    assert toze_dial(0) == 0


def test_tukope_dial_at_rest():
    assert tukope_dial(0) == 0


def test_tunude_dial_at_rest():
    assert tunude_dial(0) == 0


def test_tupunu_dial_at_rest():
    assert tupunu_dial(0) == 0


def test_vanage_dial_at_rest():
    assert vanage_dial(0) == 0


def test_vigitu_dial_at_rest():
    assert vigitu_dial(0) == 0


def test_volimi_dial_at_rest():
    assert volimi_dial(0) == 0


def test_vuni_dial_at_rest():
    assert vuni_dial(0) == 0


def test_zita_dial_at_rest():
    assert zita_dial(0) == 0


def test_zokezi_dial_at_rest():
    assert zokezi_dial(0) == 0


def test_zole_dial_at_rest():
    assert zole_dial(0) == 0
