from labels.biropa import biropa_label
from labels.bulela import bulela_label
from labels.buta import buta_label
from labels.danake import danake_label
from labels.dasi import dasi_label
from labels.denese import denese_label
from labels.diteke import diteke_label
from labels.fadoba import fadoba_label
from labels.filebo import filebo_label
from labels.fino import fino_label
from labels.fupo import fupo_label
from labels.futi import futi_label
from labels.gabe import gabe_label
from labels.galoti import galoti_label
from labels.genine import genine_label
from labels.gifu import gifu_label
from labels.gunona import gunona_label
from labels.kenu import kenu_label
from labels.kenuge import kenuge_label
from labels.kifi import kifi_label
from labels.kuzavo import kuzavo_label
from labels.lelali import lelali_label
from labels.lesulo import lesulo_label
from labels.logo import logo_label
from labels.logusu import logusu_label
from labels.lufu import lufu_label
from labels.mami import mami_label
from labels.merizo import merizo_label
from labels.mibuti import mibuti_label
from labels.mileze import mileze_label
from labels.movomu import movomu_label
from labels.muba import muba_label
from labels.nalonu import nalonu_label
from labels.naro import naro_label
from labels.nedomo import nedomo_label
from labels.nizova import nizova_label
from labels.nono import nono_label
from labels.nurobi import nurobi_label
from labels.paseve import paseve_label
from labels.pore import pore_label
from labels.pula import pula_label
from labels.puri import puri_label
from labels.rabi import rabi_label
from labels.raku import raku_label
from labels.rinulo import rinulo_label
from labels.rozobu import rozobu_label
from labels.rupu import rupu_label
from labels.sebubu import sebubu_label
from labels.sotove import sotove_label
from labels.suta import suta_label
from labels.tavo import tavo_label
from labels.tesani import tesani_label
from labels.tosi import tosi_label
from labels.toze import toze_label
from labels.tukope import tukope_label
from labels.tunude import tunude_label
from labels.tupunu import tupunu_label
from labels.vanage import vanage_label
from labels.vigitu import vigitu_label
from labels.volimi import volimi_label
from labels.vuni import vuni_label
from labels.zita import zita_label
from labels.zokezi import zokezi_label
from labels.zole import zole_label


def test_biropa_label_initial():
    assert biropa_label().startswith('b')


def test_bulela_label_initial():
    assert bulela_label().startswith('b')


def test_buta_label_initial():
    assert buta_label().startswith('b')


def test_danake_label_initial():
    assert danake_label().startswith('d')


def test_dasi_label_initial():
    assert dasi_label().startswith('d')


def test_denese_label_initial():
    assert denese_label().startswith('d')


def test_diteke_label_initial():
    assert diteke_label().startswith('d')


def test_fadoba_label_initial():
    assert fadoba_label().startswith('f')


def test_filebo_label_initial():
    assert filebo_label().startswith('f')


def test_fino_label_initial():
    assert fino_label().startswith('f')


def test_fupo_label_initial():
    assert fupo_label().startswith('f')


def test_futi_label_initial():
    assert futi_label().startswith('f')


def test_gabe_label_initial():
    assert gabe_label().startswith('g')


def test_galoti_label_initial():
    assert galoti_label().startswith('g')


def test_genine_label_initial():
    assert genine_label().startswith('g')


def test_gifu_label_initial():
    assert gifu_label().startswith('g')


def test_gunona_label_initial():
    assert gunona_label().startswith('g')


def test_kenu_label_initial():
    assert kenu_label().startswith('k')


def test_kenuge_label_initial():
    assert kenuge_label().startswith('k')


def test_kifi_label_initial():
    assert kifi_label().startswith('k')


def test_kuzavo_label_initial():
    assert kuzavo_label().startswith('k')


def test_lelali_label_initial():
    assert lelali_label().startswith('l')


def test_lesulo_label_initial():
    assert lesulo_label().startswith('l')


def test_logo_label_initial():
    assert logo_label().startswith('l')


def test_logusu_label_initial():
    assert logusu_label().startswith('l')


def test_lufu_label_initial():
    assert lufu_label().startswith('l')


def test_mami_label_initial():
    assert mami_label().startswith('m')


def test_merizo_label_initial():
    assert merizo_label().startswith('m')


def test_mibuti_label_initial():
    assert mibuti_label().startswith('m')


def test_mileze_label_initial():
    assert mileze_label().startswith('m')


def test_movomu_label_initial():
    assert movomu_label().startswith('m')


def test_muba_label_initial():
    assert muba_label().startswith('m')


def test_nalonu_label_initial():
    assert nalonu_label().startswith('n')


def test_naro_label_initial():
    assert naro_label().startswith('n')


def test_nedomo_label_initial():
    assert nedomo_label().startswith('n')


def test_nizova_label_initial():
    assert nizova_label().startswith('n')


def test_nono_label_initial():
    assert nono_label().startswith('n')


def test_nurobi_label_initial():
    assert nurobi_label().startswith('n')


def test_paseve_label_initial():
    assert paseve_label().startswith('p')


def test_pore_label_initial():
    assert pore_label().startswith('p')


def test_pula_label_initial():
    assert pula_label().startswith('p')


def test_puri_label_initial():
    assert puri_label().startswith('p')


def test_rabi_label_initial():
    assert rabi_label().startswith('r')


def test_raku_label_initial():
    assert raku_label().startswith('r')


def test_rinulo_label_initial():
    assert rinulo_label().startswith('r')


def test_rozobu_label_initial():
    assert rozobu_label().startswith('r')


def test_rupu_label_initial():
    assert rupu_label().startswith('r')


def test_sebubu_label_initial():
    assert sebubu_label().startswith('s')


def test_sotove_label_initial():
    assert sotove_label().startswith('s')


def test_suta_label_initial():
    assert suta_label().startswith('s')


def test_tavo_label_initial():
    assert tavo_label().startswith('t')


def test_tesani_label_initial():
    assert tesani_label().startswith('t')


def test_tosi_label_initial():
    assert tosi_label().startswith('t')


def test_toze_label_initial():
    assert toze_label().startswith('t')


def test_tukope_label_initial():
    assert tukope_label().startswith('t')


def test_tunude_label_initial():
    assert tunude_label().startswith('t')


def test_tupunu_label_initial():
    assert tupunu_label().startswith('t')


def test_vanage_label_initial():
    assert vanage_label().startswith('v')


def test_vigitu_label_initial():
    assert vigitu_label().startswith('v')


def test_volimi_label_initial():
    assert volimi_label().startswith('v')


def test_vuni_label_initial():
    assert vuni_label().startswith('v')


def test_zita_label_initial():
    assert zita_label().startswith('z')


def test_zokezi_label_initial():
    assert zokezi_label().startswith('z')


def test_zole_label_initial():
    assert zole_label().startswith('z')
