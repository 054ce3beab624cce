from switches.biropa import biropa_enabled
from switches.bulela import bulela_enabled
from switches.buta import buta_enabled
from switches.danake import danake_enabled
from switches.dasi import dasi_enabled
from switches.denese import denese_enabled
from switches.diteke import diteke_enabled
from switches.fadoba import fadoba_enabled
from switches.filebo import filebo_enabled
from switches.fino import fino_enabled
from switches.fupo import fupo_enabled
from switches.futi import futi_enabled
from switches.gabe import gabe_enabled
from switches.galoti import galoti_enabled
from switches.genine import genine_enabled
from switches.gifu import gifu_enabled
from switches.gunona import gunona_enabled
from switches.kenu import kenu_enabled
from switches.kenuge import kenuge_enabled
from switches.kifi import kifi_enabled
from switches.kuzavo import kuzavo_enabled
from switches.lelali import lelali_enabled
from switches.lesulo import lesulo_enabled
from switches.logo import logo_enabled
from switches.logusu import logusu_enabled
from switches.lufu import lufu_enabled
from switches.mami import mami_enabled
from switches.merizo import merizo_enabled
from switches.mibuti import mibuti_enabled
from switches.mileze import mileze_enabled
from switches.movomu import movomu_enabled
from switches.muba import muba_enabled
from switches.nalonu import nalonu_enabled
from switches.naro import naro_enabled
from switches.nedomo import nedomo_enabled
from switches.nizova import nizova_enabled
from switches.nono import nono_enabled
from switches.nurobi import nurobi_enabled
from switches.paseve import paseve_enabled
from switches.pore import pore_enabled
from switches.pula import pula_enabled
from switches.puri import puri_enabled
from switches.rabi import rabi_enabled
from switches.raku import raku_enabled
from switches.rinulo import rinulo_enabled
from switches.rozobu import rozobu_enabled
from switches.rupu import rupu_enabled
from switches.sebubu import sebubu_enabled
from switches.sotove import sotove_enabled
from switches.suta import suta_enabled
from switches.tavo import tavo_enabled
from switches.tesani import tesani_enabled
from switches.tosi import tosi_enabled
from switches.toze import toze_enabled
from switches.tukope import tukope_enabled
from switches.tunude import tunude_enabled
from switches.tupunu import tupunu_enabled
from switches.vanage import vanage_enabled
from switches.vigitu import vigitu_enabled
from switches.volimi import volimi_enabled
from switches.vuni import vuni_enabled
from switches.zita import zita_enabled
from switches.zokezi import zokezi_enabled
from switches.zole import zole_enabled


def test_biropa_enabled_is_a_flag():
    assert isinstance(biropa_enabled(), bool)


def test_bulela_enabled_is_a_flag():
    assert isinstance(bulela_enabled(), bool)


def test_buta_enabled_is_a_flag():
    assert isinstance(buta_enabled(), bool)


def test_danake_enabled_is_a_flag():
    assert isinstance(danake_enabled(), bool)


def test_dasi_enabled_is_a_flag():
    assert isinstance(dasi_enabled(), bool)


def test_denese_enabled_is_a_flag():
    assert isinstance(denese_enabled(), bool)


def test_diteke_enabled_is_a_flag():
    assert isinstance(diteke_enabled(), bool)


def test_fadoba_enabled_is_a_flag():
    assert isinstance(fadoba_enabled(), bool)


def test_filebo_enabled_is_a_flag():
    assert isinstance(filebo_enabled(), bool)


def test_fino_enabled_is_a_flag():
    assert isinstance(fino_enabled(), bool)


def test_fupo_enabled_is_a_flag():
    assert isinstance(fupo_enabled(), bool)


def test_futi_enabled_is_a_flag():
    assert isinstance(futi_enabled(), bool)


def test_gabe_enabled_is_a_flag():
    assert isinstance(gabe_enabled(), bool)


def test_galoti_enabled_is_a_flag():
    assert isinstance(galoti_enabled(), bool)


def test_genine_enabled_is_a_flag():
    assert isinstance(genine_enabled(), bool)


def test_gifu_enabled_is_a_flag():
    assert isinstance(gifu_enabled(), bool)


def test_gunona_enabled_is_a_flag():
    assert isinstance(gunona_enabled(), bool)


def test_kenu_enabled_is_a_flag():
    assert isinstance(kenu_enabled(), bool)


def test_kenuge_enabled_is_a_flag():
    assert isinstance(kenuge_enabled(), bool)


def test_kifi_enabled_is_a_flag():
    assert isinstance(kifi_enabled(), bool)


def test_kuzavo_enabled_is_a_flag():
    assert isinstance(kuzavo_enabled(), bool)


def test_lelali_enabled_is_a_flag():
    assert isinstance(lelali_enabled(), bool)


def test_lesulo_enabled_is_a_flag():
    assert isinstance(lesulo_enabled(), bool)


def test_logo_enabled_is_a_flag():
    assert isinstance(logo_enabled(), bool)


def test_logusu_enabled_is_a_flag():
    assert isinstance(logusu_enabled(), bool)


def test_lufu_enabled_is_a_flag():
    assert isinstance(lufu_enabled(), bool)


def test_mami_enabled_is_a_flag():
    assert isinstance(mami_enabled(), bool)


def test_merizo_enabled_is_a_flag():
    assert isinstance(merizo_enabled(), bool)


def test_mibuti_enabled_is_a_flag():
    assert isinstance(mibuti_enabled(), bool)


def test_mileze_enabled_is_a_flag():
    assert isinstance(mileze_enabled(), bool)


def test_movomu_enabled_is_a_flag():
    assert isinstance(movomu_enabled(), bool)


def test_muba_enabled_is_a_flag():
    assert isinstance(muba_enabled(), bool)


def test_nalonu_enabled_is_a_flag():
    assert isinstance(nalonu_enabled(), bool)


def test_naro_enabled_is_a_flag():
    assert isinstance(naro_enabled(), bool)


def test_nedomo_enabled_is_a_flag():
    assert isinstance(nedomo_enabled(), bool)


def test_nizova_enabled_is_a_flag():
    assert isinstance(nizova_enabled(), bool)


def test_nono_enabled_is_a_flag():
    assert isinstance(nono_enabled(), bool)


def test_nurobi_enabled_is_a_flag():
    assert isinstance(nurobi_enabled(), bool)


def test_paseve_enabled_is_a_flag():
    assert isinstance(paseve_enabled(), bool)


def test_pore_enabled_is_a_flag():
    assert isinstance(pore_enabled(), bool)


def test_pula_enabled_is_a_flag():
    assert isinstance(pula_enabled(), bool)


def test_puri_enabled_is_a_flag():
    assert isinstance(puri_enabled(), bool)


def test_rabi_enabled_is_a_flag():
    assert isinstance(rabi_enabled(), bool)


def test_raku_enabled_is_a_flag():
    assert isinstance(raku_enabled(), bool)


def test_rinulo_enabled_is_a_flag():
    assert isinstance(rinulo_enabled(), bool)


def test_rozobu_enabled_is_a_flag():
    assert isinstance(rozobu_enabled(), bool)


def test_rupu_enabled_is_a_flag():
    assert isinstance(rupu_enabled(), bool)


def test_sebubu_enabled_is_a_flag():
    assert isinstance(sebubu_enabled(), bool)


def test_sotove_enabled_is_a_flag():
    assert isinstance(sotove_enabled(), bool)


def test_suta_enabled_is_a_flag():
    assert isinstance(suta_enabled(), bool)


def test_tavo_enabled_is_a_flag():
    assert isinstance(tavo_enabled(), bool)


def test_tesani_enabled_is_a_flag():
    assert isinstance(tesani_enabled(), bool)


def test_tosi_enabled_is_a_flag():
    assert isinstance(tosi_enabled(), bool)


def test_toze_enabled_is_a_flag():
    assert isinstance(toze_enabled(), bool)


def test_tukope_enabled_is_a_flag():
    assert isinstance(tukope_enabled(), bool)


def test_tunude_enabled_is_a_flag():
    assert isinstance(tunude_enabled(), bool)


def test_tupunu_enabled_is_a_flag():
    assert isinstance(tupunu_enabled(), bool)


def test_vanage_enabled_is_a_flag():
    assert isinstance(vanage_enabled(), bool)


def test_vigitu_enabled_is_a_flag():
    assert isinstance(vigitu_enabled(), bool)


def test_volimi_enabled_is_a_flag():
    assert isinstance(volimi_enabled(), bool)


def test_vuni_enabled_is_a_flag():
    assert isinstance(vuni_enabled(), bool)


def test_zita_enabled_is_a_flag():
    assert isinstance(zita_enabled(), bool)


def test_zokezi_enabled_is_a_flag():
    assert isinstance(zokezi_enabled(), bool)


def test_zole_enabled_is_a_flag():
    assert isinstance(zole_enabled(), bool)
